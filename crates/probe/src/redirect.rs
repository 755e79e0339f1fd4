//! Where a redirect points. A 3xx during readiness means the target URL is
//! wrong (a missing path prefix, `http` for `https`, a trailing slash), and
//! cicada never follows one: every measured request would pay the detour.
//! The readiness check stops at once and names the `Location`.

/// Whether `status` is a redirect.
pub fn is_redirect(status: u16) -> bool {
    (300..400).contains(&status)
}

/// What a redirect tells the user: the status, where it points, what to change.
pub fn explain(url: &str, status: u16, location: Option<&str>) -> String {
    let to = match location {
        Some(l) => format!("Location: {l}"),
        None => "without a Location header".to_string(),
    };
    format!(
        "{url} answered HTTP {status} ({to}); cicada does not follow redirects: \
         point target.base_url (or target.endpoint) where the server redirects"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_redirect_names_its_status_and_location() {
        assert!(is_redirect(301) && is_redirect(307) && is_redirect(308));
        assert!(!is_redirect(200) && !is_redirect(404));
        let text = explain("http://h/health", 301, Some("https://h/health"));
        assert!(
            text.contains("HTTP 301 (Location: https://h/health)"),
            "{text}"
        );
        assert!(explain("u", 307, None).contains("without a Location header"));
    }
}
