//! Generates the gRPC code from `proto/cicada.proto` (and the `plan.proto` it imports) with a vendored `protoc`,
//! so building needs no system protobuf install.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../proto");
    let proto = proto_dir.join("cicada.proto");
    let mut config = prost_build::Config::new();
    config.protoc_executable(protoc_bin_vendored::protoc_bin_path()?);
    config.bytes(["."]);
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_with_config(config, &[proto.as_path()], &[proto_dir.as_path()])?;
    println!("cargo:rerun-if-changed={}", proto.display());
    println!(
        "cargo:rerun-if-changed={}",
        proto_dir.join("plan.proto").display()
    );
    Ok(())
}
