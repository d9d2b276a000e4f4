//! Shell completion of object names against a real in-process server: the hidden
//! `osac __complete` lists the caller's names of the kind being completed (and nothing for
//! another tenant's, or without a server), and the bash script really offers them.

mod common;

use common::start;

fn lines(text: &str) -> Vec<&str> {
    text.lines().collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn names_are_completed_by_asking_the_server() {
    let env = start().await;
    let acme = env.tenant_admin("acme").await;
    let other = env.tenant_admin("other").await;
    for (token, name, cidr) in [
        (&acme, "web-net", "10.20.0.0/16"),
        (&acme, "db-net", "10.21.0.0/16"),
        (&other, "hidden-net", "10.22.0.0/16"),
    ] {
        env.ok(token, &["create", "vn", "--name", name, "--cidr", cidr])
            .await;
    }
    env.ok(
        &acme,
        &[
            "create",
            "sg",
            "--name",
            "web-sg",
            "--virtual-network",
            "web-net",
        ],
    )
    .await;

    // After the kind: the caller's names starting with the word, and only the caller's.
    let all = env
        .ok(&acme, &["__complete", "osac", "get", "vn", ""])
        .await;
    let all = lines(&all);
    assert!(
        all.contains(&"web-net") && all.contains(&"db-net"),
        "{all:?}"
    );
    assert!(
        !all.contains(&"hidden-net"),
        "another tenant's name: {all:?}"
    );
    let we = env
        .ok(
            &acme,
            &["__complete", "osac", "describe", "virtualnetwork", "we"],
        )
        .await;
    assert_eq!(lines(&we), ["web-net"]);
    // KIND/… keeps the kind as typed.
    let slash = env
        .ok(&acme, &["__complete", "osac", "delete", "securitygroup/w"])
        .await;
    assert_eq!(lines(&slash), ["securitygroup/web-sg"]);
    // Not a name: nothing (clap's completion takes over).
    for words in [
        &["osac", "get", ""][..],
        &["osac", "get", "vn", "--filter", ""],
        &["osac", "create", "vn", ""],
    ] {
        let mut args = vec!["__complete"];
        args.extend_from_slice(words);
        assert_eq!(env.ok(&acme, &args).await, "", "{words:?}");
    }
    // A refused token or no server: silent success.
    let refused = env
        .osac("osac_nope", &["__complete", "osac", "get", "vn", ""])
        .await;
    assert!(refused.status.success());
    assert!(refused.stdout.is_empty() && refused.stderr.is_empty());
    let unreachable = env
        .osac(
            &acme,
            &[
                "__complete",
                "osac",
                "get",
                "--url",
                "http://127.0.0.1:9",
                "vn",
                "",
            ],
        )
        .await;
    assert!(unreachable.status.success());
    assert!(unreachable.stdout.is_empty() && unreachable.stderr.is_empty());

    // The scripts call it; bash's really completes with it.
    for shell in ["bash", "zsh", "fish"] {
        let script = env.ok(&acme, &["completion", shell]).await;
        assert!(script.contains("__complete"), "{shell}: {script}");
    }
    if std::process::Command::new("bash")
        .arg("--version")
        .output()
        .is_ok()
    {
        let offered = bash_completes(&env, &acme, &["osac", "get", "vn", "w"]).await;
        assert_eq!(offered, ["web-net"]);
        let kinds = bash_completes(&env, &acme, &["osac", "get", "subn"]).await;
        assert!(kinds.iter().any(|k| k == "subnet"), "{kinds:?}");
    }
}

/// What bash's completion of `osac` offers for `words` (the last one being completed).
async fn bash_completes(env: &common::Env, token: &str, words: &[&str]) -> Vec<String> {
    let dir = env.dir.path();
    let script = dir.join("osac.bash");
    let completion = env.ok(token, &["completion", "bash"]).await;
    std::fs::write(&script, completion).expect("write script");
    // The script calls `osac` by the name typed: put the binary first on PATH.
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_osac"));
    let path = format!(
        "{}:{}",
        bin.parent().expect("bin dir").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let program = format!(
        "source '{}'; COMP_WORDS=({}); COMP_CWORD={}; COMP_LINE='{}'; COMP_POINT=${{#COMP_LINE}}; \
         _osac_names osac '{}' '{}'; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        script.display(),
        quoted.join(" "),
        words.len() - 1,
        words.join(" "),
        words[words.len() - 1],
        words[words.len() - 2],
    );
    let url = env.server.url();
    let token = token.to_string();
    let config = dir.join("cli-config.json");
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new("bash")
            .args(["--norc", "-c", &program])
            .env("PATH", path)
            .env("OSAC_URL", url)
            .env("OSAC_TOKEN", token)
            .env("OSAC_CONFIG", config)
            .output()
            .expect("run bash")
    })
    .await
    .expect("join");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}
