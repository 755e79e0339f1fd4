//! `cicada`: the old name of `cicada`, kept for one release.

fn main() {
    std::process::exit(cicada_alias::become_cicada("coord", &[]));
}
