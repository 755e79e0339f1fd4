//! Streaming a file that holds one JSON array, element by element, so a
//! 640 MB ShareGPT file is never held in memory; errors name the element.

use std::cell::{Cell, RefCell};
use std::fmt;
use std::io::{BufReader, Read};
use std::marker::PhantomData;
use std::path::Path;

use serde::de::{self, DeserializeOwned, Deserializer as _, SeqAccess, Visitor};

use super::{DatasetError, Progress, open};

/// Counts bytes read into the progress.
pub(crate) struct Counting<'a, R> {
    pub inner: R,
    pub progress: &'a dyn Progress,
}

impl<R: Read> Read for Counting<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.progress.advance(n as u64);
        Ok(n)
    }
}

struct State {
    index: Cell<u64>,
    entered: Cell<bool>,
    finished: Cell<bool>,
    failure: RefCell<Option<DatasetError>>,
}

struct Elements<'a, T, F> {
    f: &'a mut F,
    state: &'a State,
    what: &'a str,
    item: PhantomData<T>,
}

impl<'de, T, F> Visitor<'de> for Elements<'_, T, F>
where
    T: DeserializeOwned,
    F: FnMut(u64, T) -> Result<(), DatasetError>,
{
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a JSON array of {}", self.what)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.state.entered.set(true);
        while let Some(item) = seq.next_element::<T>()? {
            let i = self.state.index.get();
            if let Err(e) = (self.f)(i, item) {
                *self.state.failure.borrow_mut() = Some(e);
                return Err(de::Error::custom("stopped"));
            }
            self.state.index.set(i + 1);
        }
        self.state.finished.set(true);
        Ok(())
    }
}

/// The file's name alone, for progress lines.
pub(crate) fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// Call `f(index, element)` for every element of the array in `path`, showing
/// progress in bytes; returns the number of elements.
pub(crate) fn for_each<T, F>(
    path: &Path,
    progress: &dyn Progress,
    what: &str,
    mut f: F,
) -> Result<u64, DatasetError>
where
    T: DeserializeOwned,
    F: FnMut(u64, T) -> Result<(), DatasetError>,
{
    let file = open(path)?;
    let total = file.metadata().map_or(0, |m| m.len());
    progress.start(&format!("reading {}", file_name(path)), total, "bytes");
    let reader = BufReader::with_capacity(
        1 << 20,
        Counting {
            inner: file,
            progress,
        },
    );
    let mut de = serde_json::Deserializer::from_reader(reader);
    let state = State {
        index: Cell::new(0),
        entered: Cell::new(false),
        finished: Cell::new(false),
        failure: RefCell::new(None),
    };
    let visitor = Elements {
        f: &mut f,
        state: &state,
        what,
        item: PhantomData::<T>,
    };
    let result = (&mut de).deserialize_seq(visitor).and_then(|()| de.end());
    progress.finish();
    let shown = path.display().to_string();
    match result {
        Ok(()) => Ok(state.index.get()),
        Err(e) => {
            if let Some(failure) = state.failure.take() {
                return Err(failure);
            }
            if e.is_io() {
                return Err(DatasetError::Read {
                    path: shown,
                    source: std::io::Error::other(e.to_string()),
                });
            }
            if !state.entered.get() {
                return Err(DatasetError::Format {
                    path: shown,
                    message: format!("expected a JSON array of {what}: {e}"),
                });
            }
            if state.finished.get() {
                return Err(DatasetError::Format {
                    path: shown,
                    message: format!("unexpected text after the array: {e}"),
                });
            }
            Err(DatasetError::Record {
                path: shown,
                record: state.index.get(),
                message: e.to_string(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::Silent;
    use crate::dataset::testutil::Scratch;

    #[derive(serde::Deserialize)]
    struct Item {
        v: u32,
    }

    fn sum(path: &Path) -> Result<(u64, u32), DatasetError> {
        let mut total = 0;
        let n = for_each::<Item, _>(path, &Silent, "items", |_, it| {
            total += it.v;
            Ok(())
        })?;
        Ok((n, total))
    }

    #[test]
    fn elements_stream_and_errors_name_the_element() {
        let dir = Scratch::new("json-array");
        let ok = dir.file(
            "ok.json",
            r#"[{"v": 1}, {"v": 2, "extra": [1, {"x": 2}]}, {"v": 3}]"#,
        );
        assert_eq!(sum(&ok).unwrap(), (3, 6));
        let bad = dir.file("bad.json", "[{\"v\": 1},\n {\"v\": 2},\n {\"v\": }]");
        let e = sum(&bad).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("{}: record [2]:", bad.display())),
            "{e}"
        );
        assert!(e.contains("line 3"), "{e}");
        let missing = dir.file("missing.json", r#"[{"v": 1}, {"w": 2}]"#);
        let e = sum(&missing).unwrap_err().to_string();
        assert!(
            e.contains("record [1]") && e.contains("missing field `v`"),
            "{e}"
        );
        let object = dir.file("object.json", r#"{"v": 1}"#);
        let e = sum(&object).unwrap_err().to_string();
        assert!(e.contains("expected a JSON array of items"), "{e}");
        let truncated = dir.file("truncated.json", r#"[{"v": 1}, {"v""#);
        assert!(
            sum(&truncated)
                .unwrap_err()
                .to_string()
                .contains("record [1]")
        );
        let trailing = dir.file("trailing.json", r#"[{"v": 1}] x"#);
        let e = sum(&trailing).unwrap_err().to_string();
        assert!(e.contains("after the array"), "{e}");
        let e = sum(&dir.0.join("absent.json")).unwrap_err().to_string();
        assert!(e.contains("absent.json: cannot read"), "{e}");
    }
}
