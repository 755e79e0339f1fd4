//! The page `GET /` serves: one HTML file with its CSS and script inlined,
//! all compiled into the binary (`include_str!`), nothing fetched from
//! anywhere. The charts are SVG drawn by the page's own small script (as
//! report.html's are drawn by cicada): no chart library to vendor or pin.

const HTML: &str = include_str!("assets/page.html");
const CSS: &str = include_str!("assets/page.css");
const JS: &str = include_str!("assets/page.js");
const CHARTS: &str = include_str!("assets/charts.js");

/// The whole page.
pub fn html() -> String {
    HTML.replace("/*CSS*/", CSS)
        .replace("/*CHARTS*/", CHARTS)
        .replace("/*JS*/", JS)
        .replace("{VERSION}", cicada_results::VERSION)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_page_is_self_contained() {
        let page = super::html();
        assert!(page.contains("<svg") || page.contains("createElementNS"));
        for slot in ["/*CSS*/", "/*CHARTS*/", "/*JS*/"] {
            assert!(!page.contains(slot), "{slot} was not filled");
        }
        for far in ["src=\"http", "href=\"http", "//cdn", "@import"] {
            assert!(!page.contains(far), "the page reaches out: {far}");
        }
    }
}
