//! The old command names, `cicada` and `worker`, kept for one release after
//! the move to one `cicada` binary: each says once on stderr that its name
//! is deprecated, then becomes `cicada` (found beside it) with its
//! arguments passed through, `worker` as `cicada worker`.

use std::ffi::OsString;
use std::os::unix::process::CommandExt as _;
use std::path::PathBuf;
use std::process::Command;

/// Exit code when `cicada` cannot be started (a shell's "command not found").
pub const EXIT_NOT_FOUND: i32 = 127;

/// The `cicada` executable in the directory `alias` (this program) lives in.
pub fn cicada_beside(alias: &std::path::Path) -> Option<PathBuf> {
    let dir = alias.parent()?;
    Some(dir.join(format!("cicada{}", std::env::consts::EXE_SUFFIX)))
}

/// Become `cicada <subcommand...> <args...>`: the process image is replaced,
/// so signals, exit codes and standard streams are `cicada`'s own. Returns
/// only when that fails, with the exit code to end with.
pub fn become_cicada(old_name: &str, subcommand: &[&str]) -> i32 {
    let new_name = std::iter::once("cicada")
        .chain(subcommand.iter().copied())
        .collect::<Vec<_>>()
        .join(" ");
    eprintln!(
        "{old_name}: this name is deprecated and goes in the next release; run `{new_name}` instead"
    );
    let Some(cicada) = std::env::current_exe()
        .ok()
        .and_then(|me| cicada_beside(&me))
    else {
        eprintln!("{old_name}: cannot locate this executable to find `cicada` beside it");
        return EXIT_NOT_FOUND;
    };
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let err = Command::new(&cicada).args(subcommand).args(args).exec();
    eprintln!("{old_name}: cannot run {}: {err}", cicada.display());
    EXIT_NOT_FOUND
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    #[test]
    fn cicada_is_looked_for_beside_the_alias() {
        assert_eq!(
            super::cicada_beside(Path::new("/opt/cicada/bin/coord")),
            Some(Path::new("/opt/cicada/bin/cicada").to_path_buf())
        );
    }
}
