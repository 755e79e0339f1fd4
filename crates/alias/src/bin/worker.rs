//! `worker`: the old name of `cicada worker`, kept for one release.

fn main() {
    std::process::exit(cicada_alias::become_cicada("worker", &["worker"]));
}
