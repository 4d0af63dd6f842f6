#!/usr/bin/env bash
# Regenerates the gRPC binding's Rust types from crates/agentry-a2a/proto/a2a.proto (A2A 1.0,
# package lf.a2a.v1): prost's messages and pbjson's ProtoJSON serde for them, committed as
# crates/agentry-a2a/src/grpc/lf.a2a.v1{,.serde}.rs so that no build needs protoc or a build
# script. Run it after replacing the .proto with a newer release of the specification's.
#   bash scripts/grpc-codegen.sh
# It builds a throw-away generator in a temporary folder (protox: a protobuf compiler in Rust,
# prost-build, pbjson-build) and takes the google/api/*.proto that a2a.proto imports from PyPI
# googleapis-common-protos (Apache-2.0), since protox bundles only google/protobuf.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/proto" "$WORK/src" "$WORK/out"
python3 -m pip download --quiet --disable-pip-version-check --no-deps -d "$WORK/wheel" \
  'googleapis-common-protos==1.76.0'
python3 - "$WORK" <<'PY'
import glob, sys, zipfile
work = sys.argv[1]
with zipfile.ZipFile(glob.glob(f"{work}/wheel/*.whl")[0]) as z:
    for n in z.namelist():
        if n.startswith("google/api/") and n.endswith(".proto"):
            z.extract(n, f"{work}/proto")
PY
cp crates/agentry-a2a/proto/a2a.proto "$WORK/proto/"
cat >"$WORK/Cargo.toml" <<'TOML'
[package]
name = "agentry-grpc-codegen"
version = "0.0.0"
edition = "2024"
publish = false

[dependencies]
protox = "0.10"
prost = "0.14"
prost-build = "0.14"
pbjson-build = "0.9"

[workspace]
TOML
cat >"$WORK/src/main.rs" <<'RS'
use prost::Message;

fn main() {
    let out = std::env::args().nth(1).expect("the output folder");
    let fds = protox::compile(["a2a.proto"], ["proto"]).expect("a2a.proto compiles");
    prost_build::Config::new()
        .out_dir(&out)
        .compile_well_known_types()
        .extern_path(".google.protobuf", "crate::grpc::wkt")
        .compile_fds(fds.clone())
        .expect("prost generates the messages");
    pbjson_build::Builder::new()
        .register_descriptors(&fds.encode_to_vec())
        .expect("descriptors")
        .out_dir(&out)
        .ignore_unknown_fields()
        .extern_path(".google.protobuf", "crate::grpc::wkt")
        .build(&[".lf.a2a.v1"])
        .expect("pbjson generates the serde impls");
}
RS
(cd "$WORK" && CARGO_TARGET_DIR="$WORK/target" cargo run --quiet --release -- "$WORK/out")
cp "$WORK/out/lf.a2a.v1.rs" "$WORK/out/lf.a2a.v1.serde.rs" "$ROOT/crates/agentry-a2a/src/grpc/"
echo "regenerated crates/agentry-a2a/src/grpc/lf.a2a.v1.rs and lf.a2a.v1.serde.rs"
