//! Issue 35, item 1: Locust's own web UI drives cicada. The page Locust
//! builds and ships in its PyPI wheel (`locust/webui/dist`, fetched by
//! `scripts/locust-webui.sh` into the cache, never into the clone) is served
//! by `cicada web --web-ui DIR` and used in headless Chromium as a person
//! uses it, against a real fleet (two local workers) and a standalone mock
//! whose own counts are the ground truth: the start form starts the users,
//! the statistics table fills from cicada, Edit changes the users the mock
//! sees, every tab and download resolves, Reset restarts the figures, and
//! Stop stops the run with its results written. Twice: Locust 2.46.7's page
//! sends `GET /stop` and `GET /stats/reset`, 2.47.0's sends them as POST,
//! and the result records which arrived.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use cicada_tests::browser::devtools::Tab;
use cicada_tests::servers::install;
use cicada_tests::*;
use serde_json::json;

const LIMIT: Duration = Duration::from_secs(180);

/// Generous: a busy 2-core machine runs Chromium, the fleet and the mock.
const PAGE_LIMIT: Duration = Duration::from_secs(60);

/// Locust's built page of `version`, as the project's script unpacks it.
fn locust_page(version: &str) -> PathBuf {
    let dist = install("locust-webui.sh")
        .join(format!("locust-{version}"))
        .join("dist");
    assert!(
        dist.join("index.html").exists(),
        "{}: no index.html",
        dist.display()
    );
    dist
}

/// A closed loop of 2 users at first (the form sets them), each request
/// ~300 ms at the mock.
fn scenario(mock_url: &str) -> String {
    let tables = r#"[dataset]
kind = "random"
input_len = 8
output_len = 20
[sampling]
ignore_eos = true
[load]
users = 2
duration = "150s"
"#;
    mock_chat_scenario("locust-page", 35, mock_url, tables)
}

/// Click the element matching `selector` whose text is `text`, with the mouse.
fn click_text(tab: &mut Tab, selector: &str, text: &str) {
    let (sel, txt) = (json!(selector), json!(text));
    let found = tab.eval(&format!(
        "(function(){{var e=[...document.querySelectorAll({sel})]\
         .find(function(e){{return e.textContent.trim()==={txt};}});\
         if(!e){{return false;}}e.setAttribute('data-test',{txt});return true;}})()"
    ));
    assert_eq!(found, true, "no {selector} reading `{text}` to click");
    tab.click(&format!("{selector}[data-test={txt}]"));
}

/// JavaScript: the value beside the header's `label` (Locust's SwarmMonitor).
fn monitor(label: &str) -> String {
    format!(
        "(function(){{var e=[...document.querySelectorAll('p')]\
         .find(function(p){{return p.textContent==={l};}});\
         return e&&e.nextElementSibling?e.nextElementSibling.textContent:null;}})()",
        l = json!(label)
    )
}

/// JavaScript: the statistics table's Aggregated row's `# Requests`.
const AGGREGATED: &str = "(function(){var r=[...document.querySelectorAll('tbody tr')]\
     .find(function(r){return r.cells.length>2&&r.cells[1].textContent==='Aggregated';});\
     return r?Number(r.cells[2].textContent):-1;})()";

/// JavaScript: the rows of the table the open tab shows.
const ROWS: &str = "document.querySelectorAll('tbody tr').length";

/// Wait until `/logs` (the run's stage boundaries) names `mark`.
fn wait_log(base: &str, mark: &str) {
    let deadline = Instant::now() + PAGE_LIMIT;
    loop {
        let logs = request("GET", &format!("{base}/logs"), &[], "")
            .expect("/logs answers")
            .json();
        if logs["master"].as_array().is_some_and(|l| {
            l.iter()
                .any(|l| l.as_str().is_some_and(|l| l.contains(mark)))
        }) {
            return;
        }
        assert!(Instant::now() < deadline, "no `{mark}` in /logs: {logs}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Start with the page's form, change the users with its Edit, look at each
/// tab, reset and stop with its buttons; `stopped_by` is the request
/// Locust `version`'s page sends for Stop.
fn locusts_page_runs_a_test(version: &str, stopped_by: &str) {
    let _g = serial();
    let dist = locust_page(version);
    let dir = scratch();
    let mock = Mock::start(&["--ttft-ms", "100", "--itl-ms", "10"]);
    let sc = write(dir.path(), "s.toml", &scenario(&mock.url));
    let out = dir.path().join("out");
    let ui = dist.to_string_lossy().to_string();
    let (child, base) = start_web_wait(&sc, &out, "2", &["--quiet", "--web-ui", &ui]);
    let fleet = Guarded(Some(child));
    let deadline = Instant::now() + PAGE_LIMIT;
    while request("GET", &format!("{base}/worker-count"), &[], "")
        .is_none_or(|a| a.json()["worker_count"] != 2)
    {
        assert!(Instant::now() < deadline, "the fleet never joined");
        std::thread::sleep(Duration::from_millis(200));
    }

    // Locust's start form, its Start enabled once the workers are there
    let mut tab = Tab::open(&format!("{base}/"), 1280, 1000);
    tab.wait_for(
        "document.querySelector('input[name=userCount]')!==null\
         &&!document.querySelector('button[type=submit]').disabled",
        PAGE_LIMIT,
    );
    assert_eq!(tab.eval(&monitor("Status")), "ready");
    assert_eq!(tab.eval(&monitor("Workers")), "2");
    let host = tab.eval("document.querySelector('input[name=host]').value");
    assert_eq!(host, mock.url.as_str(), "the host field shows the target");
    tab.type_into("input[name=userCount]", "3");
    tab.type_into("input[name=spawnRate]", "10");
    tab.click("button[type=submit]");
    mock.wait_for_streams(3, "the 3 users the page started");
    tab.wait_for(
        &format!("{AGGREGATED}>0&&{}==='3'", monitor("Users")),
        PAGE_LIMIT,
    );
    assert_eq!(tab.eval(&monitor("Status")), "running");

    // Edit: 6 users
    click_text(&mut tab, "button", "Edit");
    tab.wait_for(
        "[...document.querySelectorAll('button')].some(function(b){return b.textContent==='Update';})",
        PAGE_LIMIT,
    );
    tab.type_into("input[name=userCount]", "6");
    click_text(&mut tab, "button", "Update");
    mock.wait_for_streams(6, "after the page's Edit to 6 users");
    assert!(mock.open_streams(10) <= 6, "6 users, never more streams");
    tab.wait_for(&format!("{}==='6'", monitor("Users")), PAGE_LIMIT);

    // the other tabs read cicada's answers in Locust's shapes
    click_text(&mut tab, "button[role=tab]", "Current Ratio");
    tab.wait_for(
        "document.body.innerText.includes('100.0% locust-page')\
         &&document.body.innerText.includes('100.0% cicada-mock')",
        PAGE_LIMIT,
    );
    click_text(&mut tab, "button[role=tab]", "Workers");
    tab.wait_for(&format!("{ROWS}===2"), PAGE_LIMIT);
    click_text(&mut tab, "button[role=tab]", "Exceptions");
    tab.wait_for(&format!("{ROWS}===0"), PAGE_LIMIT);
    click_text(&mut tab, "button[role=tab]", "Download Data");
    tab.wait_for(
        "document.querySelectorAll('a[href^=\"./\"]').length>=4",
        PAGE_LIMIT,
    );
    let statuses = tab.eval(
        "Promise.all([...document.querySelectorAll('a[href^=\"./\"]')]\
         .map(function(a){return fetch(a.href).then(function(r){return a.getAttribute('href')+' '+r.status;});}))",
    );
    let statuses: Vec<&str> = statuses
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(|s| s.as_str())
        .collect();
    assert!(statuses.len() >= 4, "{statuses:?}");
    assert!(
        statuses.iter().all(|s| s.ends_with(" 200")),
        "every download answers: {statuses:?}"
    );
    click_text(&mut tab, "button[role=tab]", "Statistics");
    tab.wait_for(&format!("{AGGREGATED}>0"), PAGE_LIMIT);

    // Reset, then Stop, with the page's buttons: the table counts again
    // from the reset, while the mock keeps serving
    tab.wait_for(&format!("{AGGREGATED}>=60"), PAGE_LIMIT);
    let before = tab.eval(AGGREGATED).as_f64().unwrap_or(0.0);
    click_text(&mut tab, "button", "Reset");
    wait_log(&base, "`reset`");
    tab.wait_for(
        &format!("{AGGREGATED}>0&&{AGGREGATED}<{before}"),
        PAGE_LIMIT,
    );
    click_text(&mut tab, "button", "Stop");
    mock.wait_for_streams(0, "after the page's Stop");
    let deadline = Instant::now() + LIMIT;
    while !out.join("summary.csv").exists() {
        assert!(Instant::now() < deadline, "no results written");
        std::thread::sleep(Duration::from_millis(250));
    }
    let result = read_json(&out.join("result.json"));
    assert_eq!(result["cicada"]["interrupted_by"], stopped_by, "{result:#}");
    assert!(
        result["cicada"]["window_start_s"].as_f64() > Some(0.0),
        "the page's Reset started the figures again: {result:#}"
    );
    let served = mock.stats()["completed"].as_u64().unwrap_or(0);
    let completed = result["completed"].as_u64().unwrap_or(0);
    assert!(
        completed > 0 && completed < served,
        "{completed} completed since the reset, of the {served} the mock served"
    );
    assert_eq!(stage_names(&out), ["start", "edit-1", "all"]);

    // opened again, the page shows the run stopped, its figures kept
    tab.call("Page.navigate", json!({ "url": format!("{base}/") }));
    tab.wait_for(
        &format!("{}==='stopped'&&{AGGREGATED}>0", monitor("Status")),
        PAGE_LIMIT,
    );
    let problems = tab.problems();
    assert!(problems.is_empty(), "console: {problems:?}");
    drop(tab);
    let run = fleet.interrupt(LIMIT);
    assert_eq!(run.code, Some(130), "{}", run.stderr);
}

/// Locust 2.46.7's page: Stop and Reset are `GET /stop`, `GET /stats/reset`.
#[test]
fn locust_2_46_page_gets_stop_and_reset() {
    locusts_page_runs_a_test("2.46.7", "GET /stop");
}

/// Locust 2.47.0's page: Stop and Reset are `POST /stop`, `POST /stats/reset`.
#[test]
fn locust_2_47_page_posts_stop_and_reset() {
    locusts_page_runs_a_test("2.47.0", "POST /stop");
}
