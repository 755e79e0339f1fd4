//! Every scenario in examples/ runs as written, and what it writes keeps its
//! shape: `result.json`'s keys and value kinds, `summary.csv`'s columns and
//! filled cells, `timeseries.csv`'s metrics and the console block, with every
//! measured value masked, equal the golden files in `tests/golden/`. A change
//! that means to alter an output reblesses them (`CICADA_BLESS=1`) in the same
//! commit, so the diff shows what a user will see differently.

use std::time::Duration;

use cicada_tests::shape::{check_golden, console_shape, csv_shape, json_shape, timeseries_shape};
use cicada_tests::*;

#[test]
fn every_example_runs_and_keeps_its_output_shape() {
    let _g = serial();
    let dir = repo_root().join("examples");
    let golden = repo_root().join("tests").join("golden");
    let mut examples: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    examples.sort();
    assert!(
        !examples.is_empty(),
        "no examples found in {}",
        dir.display()
    );
    let mut differences = Vec::new();
    for path in &examples {
        let out = scratch();
        let out_dir = out.path().to_str().unwrap();
        let run = coord_run(
            &[
                "run",
                path.to_str().unwrap(),
                "--workers",
                "4",
                "--output-dir",
                out_dir,
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
        let name = path.file_stem().unwrap().to_str().unwrap();
        let result = read_json(&out.path().join("result.json"));
        let shapes = [
            (
                "result.json",
                serde_json::to_string_pretty(&json_shape(&result, out_dir)).unwrap(),
            ),
            (
                "summary.csv",
                csv_shape(&out.path().join("summary.csv"), out_dir),
            ),
            (
                "timeseries.csv",
                timeseries_shape(&out.path().join("timeseries.csv")),
            ),
            ("console.txt", console_shape(&run.stdout, out_dir)),
        ];
        for (file, shape) in shapes {
            if let Some(d) = check_golden(&golden.join(name).join(file), &format!("{shape}\n")) {
                differences.push(d);
            }
        }
    }
    assert!(differences.is_empty(), "{}", differences.join("\n\n"));
}
