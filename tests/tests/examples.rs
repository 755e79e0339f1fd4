//! Every scenario in examples/ runs as written.

use std::time::Duration;

use cicada_tests::*;

#[test]
fn every_example_runs() {
    let _g = serial();
    let dir = repo_root().join("examples");
    let mut ran = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        let out = scratch();
        let run = coord_run(
            &[
                "run",
                path.to_str().unwrap(),
                "--workers",
                "4",
                "--output-dir",
                out.path().to_str().unwrap(),
                "--quiet",
            ],
            Duration::from_secs(180),
        );
        assert_ok(&run);
        assert!(
            run.stdout.contains("Serving Benchmark Result"),
            "{}: no result block\n{}",
            path.display(),
            run.stdout
        );
        assert!(out.path().join("result.json").exists());
        ran += 1;
    }
    assert!(ran >= 1, "no examples found in {}", dir.display());
}
