//! Issue 27, the page as a person uses it: headless Chromium, driven over
//! the DevTools protocol, against a real fleet (`cicada run --web` with two
//! local workers) and a standalone mock whose own count of open streams is
//! the ground truth. The page loads without console messages, its Edit
//! form (typed into and clicked) changes the users the server sees, its
//! charts mark the change, and its Stop button writes the results as
//! Ctrl-C does. Screenshots are checked for the ink of the header, the
//! tables, the chart lines and the mark. With two weighted models and
//! `[[stages]]` on the built-in mock, the page shows a row per model, the
//! stage's users, and the stage's mark labelled clear of the legends.

use std::path::Path;
use std::process::Child;
use std::time::Duration;

use cicada_tests::browser::devtools::Tab;
use cicada_tests::browser::pixels_like;
use cicada_tests::*;

const LIMIT: Duration = Duration::from_secs(180);

/// Generous: a busy 2-core machine runs Chromium, the fleet and the mock.
const PAGE_LIMIT: Duration = Duration::from_secs(60);

/// A closed loop of `users` users, each request ~300 ms at the mock.
fn scenario(mock_url: &str, users: u32) -> String {
    let tables = format!(
        r#"[dataset]
kind = "random"
input_len = 8
output_len = 20
[sampling]
ignore_eos = true
[load]
users = {users}
duration = "150s"
"#
    );
    mock_chat_scenario("web-browser", 27, mock_url, &tables)
}

/// A screenshot's pixels and channel count.
fn pixels(png_path: &Path) -> (Vec<u8>, usize) {
    let file = std::fs::File::open(png_path).expect("the screenshot exists");
    let mut reader = png::Decoder::new(std::io::BufReader::new(file))
        .read_info()
        .expect("the screenshot is a PNG");
    let mut buf = vec![0; reader.output_buffer_size().expect("a PNG size")];
    let info = reader.next_frame(&mut buf).expect("a PNG frame");
    buf.truncate(info.buffer_size());
    (buf, info.color_type.samples())
}

/// The page's own error box (uncaught errors land there) and the browser's
/// console, both empty; but for `refused`, a route the test had the server
/// refuse on purpose (Chromium logs a refused request as a network error).
fn assert_quiet(tab: &mut Tab, refused: Option<&str>) {
    let on_purpose = |p: &String| {
        refused.is_some_and(|route| {
            p.starts_with("log: ")
                && p.contains("status of 400")
                && p.contains(&format!("{route}\""))
        })
    };
    let problems: Vec<String> = tab
        .problems()
        .into_iter()
        .filter(|p| !on_purpose(p))
        .collect();
    assert!(problems.is_empty(), "console: {problems:?}");
    let errors = tab.eval("document.getElementById('errors').textContent");
    assert_eq!(errors, "", "script errors");
}

/// The statistics tab, then the charts tab, each screenshot for content.
fn screenshots(tab: &mut Tab, dir: &Path) {
    let stats_png = dir.join("stats.png");
    tab.click("#tabs a[href='#stats']");
    tab.wait_for(
        "document.getElementById('stats').classList.contains('on')",
        PAGE_LIMIT,
    );
    tab.screenshot(&stats_png);
    let (img, ch) = pixels(&stats_png);
    let header = pixels_like(&img, ch, (0x1d, 0x3b, 0x2a));
    let table_lines = pixels_like(&img, ch, (0xdd, 0xe3, 0xea));
    assert!(header > 20_000, "the header bar is drawn: {header} pixels");
    assert!(
        table_lines > 1_000,
        "the tables are drawn: {table_lines} pixels"
    );

    let charts_png = dir.join("charts.png");
    tab.click("#tabs a[href='#charts']");
    tab.wait_for(
        "document.getElementById('charts').classList.contains('on')",
        PAGE_LIMIT,
    );
    tab.screenshot(&charts_png);
    let (img, ch) = pixels(&charts_png);
    let blue = pixels_like(&img, ch, (0x1f, 0x6f, 0xeb));
    let orange = pixels_like(&img, ch, (0xe8, 0x59, 0x0c));
    let mark = pixels_like(&img, ch, (0xae, 0x3e, 0xc9));
    assert!(
        blue > 1_000,
        "the first series' lines are drawn: {blue} pixels"
    );
    assert!(
        orange > 300,
        "the second series' lines are drawn: {orange} pixels"
    );
    assert!(
        mark > 200,
        "the change is marked on the charts: {mark} pixels"
    );
}

/// The `cicada run` under test, stopped if the test fails before it ends
/// (else it would run out its duration).
struct Fleet(Option<Child>);

impl Fleet {
    /// Wait for it to end (it is not killed then).
    fn wait(mut self) -> Run {
        let child = self.0.take().expect("the run is waited for once");
        wait_with_limit(child, LIMIT)
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        if let Some(child) = self.0.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Start at 3 users; in the page, type 7 into the Edit form and click
/// Change: the mock sees 7 streams. Then click Stop: exit 130 and the
/// results of both stages are written, counting what the mock served.
#[test]
fn the_page_steers_and_stops_a_fleet() {
    let _g = serial();
    let dir = scratch();
    let mock = Mock::start(&["--ttft-ms", "100", "--itl-ms", "10"]);
    let sc = write(dir.path(), "s.toml", &scenario(&mock.url, 3));
    let out = dir.path().join("out");
    let (fleet, base) = start_web_run(&sc, &out, "2", &["--quiet"]);
    let fleet = Fleet(Some(fleet));
    mock.wait_for_streams(3, "before the change");

    let mut tab = Tab::open(&format!("{base}/"), 1280, 1000);
    tab.wait_for(
        "document.body.dataset.state==='running'&&!document.getElementById('edit').hidden\
         &&Number(document.getElementById('status').dataset.points)>=2",
        PAGE_LIMIT,
    );
    assert_quiet(&mut tab, None);
    let shown = tab.eval("document.querySelector('#steer [name=user_count]').value");
    assert_eq!(shown, "3", "the Edit form shows the users running");
    let open_fields = tab.eval("document.getElementById('steer-open').hidden");
    assert_eq!(open_fields, true, "a closed loop has no rate fields");

    tab.type_into("#steer [name=user_count]", "7");
    tab.type_into("#steer [name=spawn_rate]", "50");
    tab.click("#edit-go");
    tab.wait_for(
        "document.getElementById('edit-msg').textContent!==''",
        PAGE_LIMIT,
    );
    let msg = tab.eval("document.getElementById('edit-msg').textContent");
    let ok = tab.eval("document.getElementById('edit-msg').dataset.ok");
    assert_eq!(ok, "true", "the change was taken: {msg}");
    mock.wait_for_streams(7, "after the change from the page");
    assert!(mock.open_streams(10) <= 7, "7 users, never more streams");
    tab.wait_for(
        "document.getElementById('users').textContent==='7'\
         &&document.querySelectorAll('#chart-rps g.mark[data-mark=\"edit-1\"]').length===1",
        PAGE_LIMIT,
    );
    screenshots(&mut tab, dir.path());
    assert_quiet(&mut tab, None);

    let served_before_stop = mock.stats()["completed"].as_u64().unwrap_or(0);
    tab.click("#stop");
    let run = fleet.wait();
    assert_eq!(
        run.code,
        Some(130),
        "Stop stops as Ctrl-C does\n{}",
        run.stderr
    );
    let result = read_json(&out.join("result.json"));
    assert_eq!(
        result["cicada"]["interrupted_by"], "POST /stop",
        "{result:#}"
    );
    let completed = result["completed"].as_u64().unwrap_or(0);
    let served = mock.stats()["completed"].as_u64().unwrap_or(0);
    assert!(
        completed + 10 >= served_before_stop && completed <= served,
        "the result counts the requests so far: {completed} (the mock served \
         {served_before_stop} before Stop, {served} in all)"
    );
    assert_eq!(
        stage_names(&out),
        ["start", "edit-1", "all"],
        "each stage, then the whole run"
    );
    let after = read_json(&out.join("result-stage2.json"));
    assert_eq!(after["cicada"]["scenario"]["load"]["users"], 7, "{after:#}");
}

/// An open loop's Edit form shows its rate and cap (not users), and posts
/// them to `/swarm` as `rate` and `max_concurrency`; whatever the server
/// answers shows beside the form. (While the server refuses to change a
/// running open loop, its refusal names the field the page posted.)
#[test]
fn the_open_loop_edit_form_posts_rate_and_cap() {
    let _g = serial();
    let dir = scratch();
    let mock = Mock::start(&["--ttft-ms", "20", "--itl-ms", "5"]);
    let sc = scenario(&mock.url, 1).replace("users = 1", "request_rate = 20\nmax_concurrency = 8");
    let sc = write(dir.path(), "s.toml", &sc);
    let out = dir.path().join("out");
    let (fleet, base) = start_web_run(&sc, &out, "1", &["--quiet"]);
    let fleet = Fleet(Some(fleet));
    let mut tab = Tab::open(&format!("{base}/"), 1280, 900);
    tab.wait_for(
        "document.body.dataset.state==='running'&&!document.getElementById('edit').hidden",
        PAGE_LIMIT,
    );
    let fields = tab.eval(
        "[document.getElementById('steer-open').hidden,document.getElementById('steer-closed').hidden,\
         document.querySelector('#steer [name=rate]').value,\
         document.querySelector('#steer [name=max_concurrency]').value]",
    );
    assert_eq!(
        fields,
        serde_json::json!([false, true, "20", "8"]),
        "rate and cap, not users"
    );
    tab.type_into("#steer [name=rate]", "40");
    tab.click("#edit-go");
    tab.wait_for(
        "document.getElementById('edit-msg').textContent!==''",
        PAGE_LIMIT,
    );
    let msg = tab.eval("document.getElementById('edit-msg').textContent");
    let ok = tab.eval("document.getElementById('edit-msg').dataset.ok");
    let msg = msg.as_str().unwrap_or_default();
    assert!(
        ok == "true" || msg.starts_with("rate:") || msg.starts_with("max_concurrency:"),
        "the server's answer to the posted rate shows: {ok} {msg:?}"
    );
    assert_quiet(&mut tab, Some("/swarm"));
    tab.click("#stop");
    let run = fleet.wait();
    assert_eq!(run.code, Some(130), "{}", run.stderr);
    assert!(out.join("result.json").exists());
}

/// Two weighted models behind the built-in mock, 2 users for 4 s, then 4
/// in the stage `high`.
const STAGED_MODELS: &str = r#"
name = "web-models"
seed = 27
[target]
backend = "mock"
models = [{ name = "big", weight = 3 }, { name = "small", weight = 1 }]
[mock]
ttft_ms = 60
itl_ms = 8
[dataset]
kind = "random"
input_len = 8
output_len = 12
[sampling]
ignore_eos = true
[[stages]]
duration = "4s"
users = 2
[[stages]]
name = "high"
duration = "150s"
users = 4
"#;

/// Every pair of a chart's legend entries and mark labels whose boxes on
/// the screen overlap, as "chart: a / b" (the charts tab must be shown).
const OVERLAPS: &str = "(function(){var out=[];\
document.querySelectorAll('#charts svg.chart').forEach(function(svg,c){\
var boxes=[];svg.querySelectorAll('g.legend,text.mark-label').forEach(function(e){boxes.push([e.textContent,e.getBoundingClientRect()]);});\
for(var i=0;i<boxes.length;i++){for(var j=i+1;j<boxes.length;j++){var a=boxes[i][1],b=boxes[j][1];\
if(a.left<b.right&&b.left<a.right&&a.top<b.bottom&&b.top<a.bottom){out.push(c+': '+boxes[i][0]+' / '+boxes[j][0]);}}}});\
return out;})()";

/// The statistics table's rows as (name, requests).
const ROWS: &str = "Array.from(document.querySelectorAll('#stats-table tbody tr'))\
.map(function(tr){return [tr.cells[0].textContent,Number(tr.cells[1].textContent)];})";

/// A scenario with two weighted models and `[[stages]]`: the page shows a
/// row per model (their requests adding up to the aggregate, the heavier
/// model ahead), the header shows the stage's users once `high` runs, and
/// the charts mark `high` with a label that overlaps no legend.
#[test]
fn the_page_shows_each_model_and_marks_the_stage() {
    let _g = serial();
    let dir = scratch();
    let sc = write(dir.path(), "s.toml", STAGED_MODELS);
    let out = dir.path().join("out");
    let (fleet, base) = start_web_run(&sc, &out, "2", &["--quiet"]);
    let fleet = Fleet(Some(fleet));
    let mut tab = Tab::open(&format!("{base}/"), 1280, 1000);
    // the stage `high` runs, and enough requests ended for the weights to show
    tab.wait_for(
        "document.getElementById('load').textContent.indexOf('(high)')>=0\
         &&Number(document.getElementById('status').dataset.requests)>=60",
        PAGE_LIMIT,
    );
    assert_quiet(&mut tab, None);
    let users = tab.eval("document.getElementById('users').textContent");
    assert_eq!(
        users, "4",
        "the header shows the users of the stage running"
    );
    let load = tab.eval("document.getElementById('load').textContent");
    assert_eq!(load, "4 users (high)");

    let rows: Vec<(String, u64)> =
        serde_json::from_value(tab.eval(ROWS)).expect("the table's rows");
    let names: Vec<&str> = rows.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        ["model:big", "model:small", "Aggregated"],
        "a row per model: {rows:?}"
    );
    let (big, small, all) = (rows[0].1, rows[1].1, rows[2].1);
    assert_eq!(big + small, all, "the models' rows add up: {rows:?}");
    assert!(
        big > small && small > 0,
        "weights 3:1 give the heavier model more requests: {rows:?}"
    );

    tab.click("#tabs a[href='#charts']");
    tab.wait_for(
        "document.getElementById('charts').classList.contains('on')\
         &&document.querySelectorAll('#charts g.mark[data-mark=\"high\"] text.mark-label').length===6",
        PAGE_LIMIT,
    );
    let overlaps = tab.eval(OVERLAPS);
    assert_eq!(
        overlaps,
        serde_json::json!([]),
        "no mark label overlaps a legend or another label"
    );
    let png = dir.path().join("charts.png");
    tab.screenshot(&png);
    let (img, ch) = pixels(&png);
    let mark = pixels_like(&img, ch, (0xae, 0x3e, 0xc9));
    let label = pixels_like(&img, ch, (0x7a, 0x2a, 0x8f));
    assert!(mark > 200, "the stages' lines are drawn: {mark} pixels");
    assert!(label > 20, "the stages' labels are drawn: {label} pixels");
    assert_quiet(&mut tab, None);

    tab.click("#stop");
    let run = fleet.wait();
    assert_eq!(run.code, Some(130), "{}", run.stderr);
    let result = read_json(&out.join("result.json"));
    let models = result["cicada"]["models"].as_array().map_or(0, |m| m.len());
    assert_eq!(models, 2, "{result:#}");
}
