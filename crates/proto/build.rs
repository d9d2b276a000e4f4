//! Generates prost types, tonic services, proto-JSON serde impls and the reflection descriptor.

use std::{env, path::PathBuf};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../proto");
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
    files.sort();
    tonic_prost_build::configure()
        .file_descriptor_set_path(&descriptor)
        .compile_well_known_types(true)
        .extern_path(".google.protobuf", "::pbjson_types")
        .build_client(true)
        .build_server(true)
        .compile_protos(&files, &[root])?;
    let set = std::fs::read(&descriptor)?;
    pbjson_build::Builder::new()
        .register_descriptors(&set)?
        .preserve_proto_field_names()
        .build(&[".osacnet"])?;
    Ok(())
}
