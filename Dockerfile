# syntax=docker/dockerfile:1
# cicada's image: the one `cicada` binary (plus `coord` and `worker`, the old
# names kept for one release) in a slim, non-root runtime image.
#
#   docker build -t registry.example.com/cicada:0.1.0 .
#
# Kubernetes (deploy/k8s) runs `cicada run` and `cicada worker` from it;
# nothing secret is baked in: the worker token and API keys come from the
# environment or mounted files at run time.

# ---- build: the release binaries -------------------------------------------
ARG RUST_VERSION=1.95
FROM rust:${RUST_VERSION}-bookworm AS build
WORKDIR /src
# protoc comes vendored with the build dependencies; no system packages needed.
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p cicada -p cicada-alias --bins \
 && install -D -m 0755 target/release/cicada /out/cicada \
 && install -D -m 0755 target/release/coord /out/coord \
 && install -D -m 0755 target/release/worker /out/worker

# ---- runtime: glibc, CA certificates, no shell ------------------------------
FROM gcr.io/distroless/cc-debian12:nonroot AS runtime
COPY --from=build /out/cicada /out/coord /out/worker /usr/local/bin/
# distroless's "nonroot" user; the manifests run as the same uid
USER 65532:65532
WORKDIR /home/nonroot
# `cicada run` and `cicada worker --coordinator` are given by the job that runs the image.
ENTRYPOINT ["cicada"]
CMD ["--help"]
