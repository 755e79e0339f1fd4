//! Uploads as `/v1/audio/transcriptions` takes them: a multipart/form-data
//! body read into the request the mock acts on (its fields) and the size of
//! its `file`. A small careful parser: parts are found by their delimiter
//! line, every length is bounded by the body's, and a form without a
//! closing delimiter or a `file` is refused.

use crate::request::{IncomingRequest, StreamOptions};

/// Most form fields read (the client sends a dozen).
const MAX_FIELDS: usize = 64;
/// Longest field value kept, bytes.
const MAX_FIELD_BYTES: usize = 4096;

/// The boundary of a `multipart/form-data` content type.
pub(crate) fn boundary(content_type: &str) -> Option<&str> {
    let (kind, params) = content_type.split_once(';')?;
    if !kind.trim().eq_ignore_ascii_case("multipart/form-data") {
        return None;
    }
    params.split(';').find_map(|p| {
        let (k, v) = p.trim().split_once('=')?;
        k.eq_ignore_ascii_case("boundary")
            .then(|| v.trim_matches('"'))
            .filter(|b| !b.is_empty() && b.len() <= 70)
    })
}

/// One part: its form name, and its bytes.
struct Part<'a> {
    name: &'a str,
    file: bool,
    data: &'a [u8],
}

/// What is wrong with an upload form (the mock answers 400 with it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FormError(pub String);

impl From<String> for FormError {
    fn from(message: String) -> Self {
        Self(message)
    }
}

impl From<&str> for FormError {
    fn from(message: &str) -> Self {
        Self(message.to_string())
    }
}

/// The parts of `body` split at `--boundary` lines.
fn parts<'a>(body: &'a [u8], boundary: &str) -> Result<Vec<Part<'a>>, FormError> {
    let delim = format!("--{boundary}");
    let finder = memchr::memmem::Finder::new(delim.as_bytes());
    let mut at = finder
        .find(body)
        .ok_or("the body holds no part delimiter")?
        + delim.len();
    let mut out = Vec::new();
    loop {
        let rest = &body[at..];
        if rest.starts_with(b"--") {
            return Ok(out);
        }
        let rest = rest
            .strip_prefix(b"\r\n")
            .ok_or("a delimiter not followed by CRLF")?;
        let head_end = memchr::memmem::find(rest, b"\r\n\r\n").ok_or("a part without headers")?;
        let head =
            std::str::from_utf8(&rest[..head_end]).map_err(|_| "part headers are not UTF-8")?;
        let content = &rest[head_end + 4..];
        let end = finder
            .find(content)
            .ok_or("the form has no closing delimiter")?;
        // the CRLF before a delimiter belongs to the delimiter
        let data = content[..end]
            .strip_suffix(b"\r\n")
            .ok_or("a part not ended by CRLF")?;
        let disposition = head
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.trim()
                    .eq_ignore_ascii_case("content-disposition")
                    .then_some(v)
            })
            .ok_or("a part without Content-Disposition")?;
        let param = |key: &str| {
            disposition.split(';').find_map(|p| {
                let (k, v) = p.trim().split_once('=')?;
                (k == key).then(|| v.trim_matches('"'))
            })
        };
        out.push(Part {
            name: param("name").ok_or("a part without a name")?,
            file: param("filename").is_some(),
            data,
        });
        if out.len() > MAX_FIELDS {
            return Err(FormError(format!("more than {MAX_FIELDS} parts")));
        }
        at = body.len() - content.len() + end + delim.len();
    }
}

/// The transcription request in `body`, and the bytes of its `file`.
pub(crate) fn transcription(
    body: &[u8],
    boundary: &str,
) -> Result<(IncomingRequest, u64), FormError> {
    let mut req = IncomingRequest::default();
    let mut file = None;
    let mut options = StreamOptions::default();
    for p in parts(body, boundary)? {
        if p.name == "file" && p.file {
            file = Some(p.data.len() as u64);
            continue;
        }
        if p.data.len() > MAX_FIELD_BYTES {
            return Err(FormError(format!(
                "field {} is longer than {MAX_FIELD_BYTES} bytes",
                p.name
            )));
        }
        let v =
            std::str::from_utf8(p.data).map_err(|_| format!("field {} is not UTF-8", p.name))?;
        let flag = || v.eq_ignore_ascii_case("true");
        let number = || {
            v.parse::<u32>()
                .map_err(|_| format!("field {} is not a count: {v}", p.name))
        };
        match p.name {
            "model" => req.model = Some(v.to_string()),
            "stream" => req.stream = flag(),
            "stream_include_usage" => options.include_usage = flag(),
            "stream_continuous_usage_stats" => options.continuous_usage_stats = flag(),
            "max_completion_tokens" => req.max_completion_tokens = Some(number()?),
            "ignore_eos" => req.ignore_eos = flag(),
            "min_tokens" => req.min_tokens = Some(number()?),
            _ => {}
        }
    }
    req.stream_options = Some(options);
    let file = file.ok_or("the form has no file")?;
    Ok((req, file))
}

#[cfg(test)]
mod tests {
    use super::*;

    const B: &str = "xyz";

    fn form(parts: &[(&str, Option<&str>, &[u8])]) -> Vec<u8> {
        let mut out = Vec::new();
        for (name, filename, data) in parts {
            out.extend_from_slice(
                format!("--{B}\r\nContent-Disposition: form-data; name=\"{name}\"").as_bytes(),
            );
            if let Some(f) = filename {
                out.extend_from_slice(
                    format!("; filename=\"{f}\"\r\nContent-Type: audio/wav").as_bytes(),
                );
            }
            out.extend_from_slice(b"\r\n\r\n");
            out.extend_from_slice(data);
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(format!("--{B}--\r\n").as_bytes());
        out
    }

    /// Fields are read, the file is measured (a CRLF inside it kept).
    #[test]
    fn fields_and_the_file_are_read() {
        assert_eq!(boundary("multipart/form-data; boundary=xyz"), Some("xyz"));
        assert_eq!(boundary("application/json"), None);
        let body = form(&[
            ("file", Some("a.wav"), b"RIFF\r\n--xy"),
            ("model", None, b"m"),
            ("stream", None, b"true"),
            ("stream_include_usage", None, b"true"),
            ("max_completion_tokens", None, b"9"),
        ]);
        let (req, file) = transcription(&body, B).unwrap();
        assert_eq!(file, 10);
        assert!(req.stream);
        assert_eq!(req.max_completion_tokens, Some(9));
        assert!(req.stream_options.unwrap().include_usage);
    }

    /// Broken forms are refused with the reason, never read past their end.
    #[test]
    fn broken_forms_are_refused() {
        let whole = form(&[("file", Some("a.wav"), b"RIFF")]);
        for cut in 0..whole.len() - 4 {
            assert!(transcription(&whole[..cut], B).is_err(), "cut at {cut}");
        }
        let no_file = form(&[("model", None, b"m")]);
        assert_eq!(
            transcription(&no_file, B).unwrap_err().to_string(),
            "the form has no file"
        );
        let bad = form(&[
            ("file", Some("a"), b""),
            ("max_completion_tokens", None, b"x"),
        ]);
        let e = transcription(&bad, B).unwrap_err().to_string();
        assert!(e.contains("not a count"));
    }
}
