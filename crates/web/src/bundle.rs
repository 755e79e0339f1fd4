//! `--web-ui DIR`: Locust's own built web UI (the `locust/webui/dist`
//! directory of a `locust` wheel, which `scripts/locust-webui.sh` unpacks
//! into the cache) served at `/` in place of cicada's page. Its
//! `index.html` is a Flask/Jinja template whose one slot,
//! `{{ template_args|tojson }}`, cicada fills from the run's board as
//! Locust's `WebUI.update_template_args` would; the files of its `assets/`
//! are read once at start and served from memory (no path from a request
//! ever reaches the file system).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use serde_json::Value;

/// The slot of Locust's `index.html` that receives the template's arguments.
const SLOT: &str = "{{ template_args|tojson }}";

/// Why `--web-ui DIR` cannot be served: what is missing, and where.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    /// `DIR/index.html` cannot be read.
    #[error(
        "--web-ui {}: {}: {error} (give the webui/dist directory of a locust wheel; \
         scripts/locust-webui.sh unpacks one)",
        dir.display(),
        index.display()
    )]
    Index {
        dir: PathBuf,
        index: PathBuf,
        error: std::io::Error,
    },
    /// `index.html` has no slot for the template's arguments.
    #[error("--web-ui {}: index.html has no `{SLOT}`: not Locust's built page", dir.display())]
    NoSlot { dir: PathBuf },
    /// `DIR/assets` or a file in it cannot be read.
    #[error("--web-ui {}: {error}", path.display())]
    Asset {
        path: PathBuf,
        error: std::io::Error,
    },
}

/// Locust's built page, ready to serve.
#[derive(Debug)]
pub struct Bundle {
    /// `index.html`, its slot still in place.
    index: String,
    /// `assets/<name>` -> (content type, bytes).
    assets: HashMap<String, (&'static str, Bytes)>,
}

/// The content type a browser needs for an asset (a module script is
/// refused under any but a JavaScript type).
fn content_type(name: &str) -> &'static str {
    match name.rsplit_once('.').map(|(_, ext)| ext) {
        Some("js" | "mjs") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("html") => "text/html; charset=utf-8",
        Some("json" | "map") => "application/json",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("gif") => "image/gif",
        Some("ico") => "image/x-icon",
        Some("woff2") => "font/woff2",
        Some("woff") => "font/woff",
        Some("ttf") => "font/ttf",
        _ => "application/octet-stream",
    }
}

impl Bundle {
    /// Read `dir/index.html` (which must hold Locust's slot) and the files
    /// of `dir/assets`; the error says what is missing.
    pub fn load(dir: &Path) -> Result<Self, BundleError> {
        let index_path = dir.join("index.html");
        let index = std::fs::read_to_string(&index_path).map_err(|error| BundleError::Index {
            dir: dir.to_path_buf(),
            index: index_path,
            error,
        })?;
        if !index.contains(SLOT) {
            return Err(BundleError::NoSlot {
                dir: dir.to_path_buf(),
            });
        }
        let assets_dir = dir.join("assets");
        let asset = |path: &Path| {
            let path = path.to_path_buf();
            move |error| BundleError::Asset { path, error }
        };
        let entries = std::fs::read_dir(&assets_dir).map_err(asset(&assets_dir))?;
        let mut assets = HashMap::new();
        for entry in entries {
            let entry = entry.map_err(asset(&assets_dir))?;
            let path = entry.path();
            if !path.is_file() {
                continue;
            }
            let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            let bytes = std::fs::read(&path).map_err(asset(&path))?;
            assets.insert(name.to_string(), (content_type(name), Bytes::from(bytes)));
        }
        Ok(Self { index, assets })
    }

    /// `index.html` with `args` in its slot, escaped as Jinja's `tojson`
    /// escapes (`<`, `>`, `&`, `'`), so no value can close the script.
    pub fn page(&self, args: &Value) -> String {
        let json = args
            .to_string()
            .replace('<', "\\u003c")
            .replace('>', "\\u003e")
            .replace('&', "\\u0026")
            .replace('\'', "\\u0027");
        self.index.replace(SLOT, &json)
    }

    /// The asset `name` (a file directly under `assets/`) and its type.
    pub fn asset(&self, name: &str) -> Option<(&'static str, Bytes)> {
        self.assets.get(name).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_slot_is_filled_and_assets_are_served_by_name_only() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("index.html"),
            "<script>window.templateArgs = {{ template_args|tojson }}</script>",
        )
        .unwrap();
        std::fs::create_dir(dir.path().join("assets")).unwrap();
        std::fs::write(dir.path().join("assets/src-x.js"), "export{}").unwrap();
        let b = Bundle::load(dir.path()).unwrap();
        let page = b.page(&json!({"host": "</script><b>'&"}));
        assert_eq!(
            page,
            "<script>window.templateArgs = {\"host\":\"\\u003c/script\\u003e\\u003cb\\u003e\\u0027\\u0026\"}</script>"
        );
        let (kind, body) = b.asset("src-x.js").unwrap();
        assert_eq!(
            (kind, &body[..]),
            ("text/javascript; charset=utf-8", &b"export{}"[..])
        );
        assert!(b.asset("../index.html").is_none());

        std::fs::write(dir.path().join("index.html"), "<html></html>").unwrap();
        let e = Bundle::load(dir.path()).unwrap_err();
        assert!(matches!(e, BundleError::NoSlot { .. }), "{e}");
        assert!(e.to_string().contains("not Locust's built page"), "{e}");
        let e = Bundle::load(&dir.path().join("nowhere")).unwrap_err();
        assert!(matches!(e, BundleError::Index { .. }), "{e}");
        assert!(e.to_string().contains("scripts/locust-webui.sh"), "{e}");
    }
}
