//! Generates the collections' service definitions (build/collections.rs), then prost types, tonic services (feature `grpc`), proto-JSON serde impls and the reflection descriptor,
//! with the pure-Rust protobuf compiler protox (no `protoc` on the build machine).

use std::{env, path::PathBuf};

#[path = "build/collections.rs"]
mod collections;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Read when the script runs, not when it is compiled: a build script compiled for one
    // checkout may be run for another that shares the target directory.
    let root = PathBuf::from(env::var("CARGO_MANIFEST_DIR")?).join("../../proto");
    let out = PathBuf::from(env::var("OUT_DIR")?);
    let descriptor = out.join("osacnet_descriptor.bin");
    let mut files = Vec::new();
    for dir in ["osacnet/v1", "osacnet/admin/v1"] {
        // A new file in the directory must re-run the build too.
        println!("cargo:rerun-if-changed={}", root.join(dir).display());
        for entry in std::fs::read_dir(root.join(dir))? {
            let path = entry?.path();
            if path.extension().is_some_and(|e| e == "proto") {
                println!("cargo:rerun-if-changed={}", path.display());
                files.push(path);
            }
        }
    }
    // Every collection's service, from one table (see build/collections.rs).
    let generated = out.join("proto");
    println!("cargo:rerun-if-changed=build/collections.rs");
    for (package, dir, table) in [
        ("osacnet.v1", "osacnet/v1", collections::TENANT),
        ("osacnet.admin.v1", "osacnet/admin/v1", collections::ADMIN),
    ] {
        let path = generated.join(dir).join("services.proto");
        std::fs::create_dir_all(generated.join(dir))?;
        std::fs::write(&path, collections::services_proto(package, table))?;
        files.push(path);
    }
    files.sort();
    // protox (pure Rust) parses the protos: no `protoc` needed. Imports and source info
    // (comments, for the OpenAPI document) are kept, as `protoc --include_imports
    // --include_source_info` did.
    let fds = protox::Compiler::new([&root, &generated])?
        .include_imports(true)
        .include_source_info(true)
        .open_files(&files)?
        .file_descriptor_set();
    let set = prost::Message::encode_to_vec(&fds);
    std::fs::write(&descriptor, &set)?;
    messages_and_services(fds)?;
    pbjson_build::Builder::new()
        .register_descriptors(&set)?
        .preserve_proto_field_names()
        .build(&[".osacnet"])?;
    Ok(())
}

/// The prost message types, and with the `grpc` feature the tonic clients and servers too.
#[cfg(feature = "grpc")]
fn messages_and_services(
    fds: prost_types::FileDescriptorSet,
) -> Result<(), Box<dyn std::error::Error>> {
    tonic_prost_build::configure()
        .compile_well_known_types(true)
        .extern_path(".google.protobuf", "::pbjson_types")
        .build_client(true)
        .build_server(true)
        // What tonic adds itself when it runs protoc.
        .type_attribute(".", "#[allow(clippy::all)]")
        .compile_fds(fds)?;
    Ok(())
}

/// The prost message types alone (no `grpc` feature).
#[cfg(not(feature = "grpc"))]
fn messages_and_services(
    fds: prost_types::FileDescriptorSet,
) -> Result<(), Box<dyn std::error::Error>> {
    prost_build::Config::new()
        .compile_well_known_types()
        .extern_path(".google.protobuf", "::pbjson_types")
        .type_attribute(".", "#[allow(clippy::all)]")
        .compile_fds(fds)?;
    Ok(())
}
