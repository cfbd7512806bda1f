//! The capture reader (`capture::Reader`) as a Python iterator,
//! `nfstrace._native.Frames`: what `nfstrace/parsers/capture.py`'s
//! `read_frames` and `stream_frames` hand out (the frames of one capture, for
//! `nfstrace watch`, the grouping of captures by their first and last frames,
//! the parallel parse's sample and the pyshark backend's file facts).
//!
//! Each frame is a tuple `(ts_ns, linktype, data, orig_len, file_index)`,
//! `data` a `bytes` of its captured bytes.  The CaptureInfo given is kept
//! current where a reader's user looks while it reads (format, link types,
//! snaplen, `read_bytes`); the rest of what the reader learned is `info()`,
//! which capture.py puts into it at the end.

use crate::capture::{FileInfo, Reader, Source};
use crate::python::{file_info, PyRead};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyTuple};
use std::fs::File;
use std::io::Read;
use std::os::fd::{FromRawFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// A file read here, the GIL released while it reads (another thread, such as
/// watch's loop, runs meanwhile), counting the bytes taken from it.
struct Unlocked {
    file: File,
    taken: Arc<AtomicU64>,
}

impl Read for Unlocked {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let file = &mut self.file;
        let n = Python::with_gil(|py| py.allow_threads(|| file.read(out)))?;
        self.taken.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// What `info` was last told (see Frames::show).
#[derive(Default, PartialEq)]
struct Shown {
    snaplen: u64,
    linktypes: usize,
    taken: u64,
}

struct State {
    /// None once the capture is read to its end or closed
    reader: Option<Reader>,
    /// what the reader learned, once it is gone
    learned: FileInfo,
    shown: Shown,
}

/// Frames(source, index, info, max_frame, max_drops, chunk, live=False, taken=None)
///
/// source: a file descriptor (an int; the reader owns and closes it) or a
/// callable read(n) -> bytes (b"" at the end); index: the file index put in
/// each frame; info: the CaptureInfo to keep current; max_frame: a captured
/// length above it is damage; max_drops: a pcapng drop count above it is no
/// count; chunk: bytes read at a time; live: a stream, each read taking what
/// has arrived (a frame handed out once its record is whole); taken: a
/// callable giving the bytes of the file on disk read so far (a compressed
/// file's packed bytes; else the bytes read are counted).
/// Raises ValueError(message) when the source is not a pcap/pcapng capture.
#[pyclass(module = "nfstrace._native")]
pub struct Frames {
    state: Mutex<State>,
    index: i64,
    info: PyObject,
    taken: Arc<AtomicU64>,
}

#[pymethods]
impl Frames {
    #[new]
    #[pyo3(signature = (source, index, info, max_frame, max_drops, chunk, live=false, taken=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        source: &Bound<'_, PyAny>,
        index: i64,
        info: PyObject,
        max_frame: usize,
        max_drops: u64,
        chunk: usize,
        live: bool,
        taken: Option<PyObject>,
    ) -> PyResult<Frames> {
        let counter = Arc::new(AtomicU64::new(0));
        let src = if let Ok(fd) = source.extract::<RawFd>() {
            // SAFETY: the caller hands the descriptor over (os.dup): owned here
            let file = unsafe { File::from_raw_fd(fd) };
            // read, not mapped (capture::Mapped): a page fault waiting for
            // the disk would hold the GIL, a read releases it
            Source::Stream(Box::new(Unlocked {
                file,
                taken: Arc::clone(&counter),
            }))
        } else {
            let read = PyRead::new(source.clone().unbind(), chunk);
            Source::Stream(Box::new(read.counting(taken, Arc::clone(&counter))))
        };
        let reader = Reader::open_with(src, max_frame, max_drops, chunk, live)
            .map_err(PyValueError::new_err)?;
        let frames = Frames {
            state: Mutex::new(State {
                reader: None,
                learned: FileInfo::default(),
                shown: Shown::default(),
            }),
            index,
            info,
            taken: counter,
        };
        let bound = frames.info.bind(py);
        bound.setattr("format", reader.info.format)?;
        {
            let mut state = frames.state()?;
            state.reader = Some(reader);
            frames.show(py, &mut state)?;
        }
        Ok(frames)
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Py<PyTuple>>> {
        let mut state = self.state()?;
        let Some(reader) = state.reader.as_mut() else {
            return Ok(None);
        };
        let Some(f) = reader.next_frame() else {
            self.show(py, &mut state)?;
            let reader = state.reader.take();
            state.learned = reader.map(|r| r.info).unwrap_or_default();
            return Ok(None);
        };
        let data = PyBytes::new(py, reader.data(&f));
        self.show(py, &mut state)?;
        let t = (f.ts, f.linktype, data, f.origlen, self.index);
        Ok(Some(t.into_pyobject(py)?.unbind()))
    }

    /// What the reader learned about the capture so far (all of it once read
    /// to its end): a dict of capture.py's take_facts.
    fn info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let state = self.state()?;
        match &state.reader {
            Some(r) => file_info(py, &r.info),
            None => file_info(py, &state.learned),
        }
    }

    /// Stop reading (the file closed); info() keeps what was learned.
    fn close(&self) -> PyResult<()> {
        let mut state = self.state()?;
        if let Some(r) = state.reader.take() {
            state.learned = r.info;
        }
        Ok(())
    }
}

impl Frames {
    /// The reader's state; an error, not a wait, when another thread is
    /// reading with it (it may be waiting for the GIL this thread holds).
    fn state(&self) -> PyResult<MutexGuard<'_, State>> {
        self.state
            .try_lock()
            .map_err(|_| PyRuntimeError::new_err("Frames: read by another thread at once"))
    }

    /// Tell `info` what changed of what a reader's user looks at while it
    /// reads: the snaplen (watch's evidence files), the link types, the bytes
    /// read (the parallel parse's sample).  Compared here on every frame, set
    /// in Python only when changed.
    fn show(&self, py: Python<'_>, state: &mut State) -> PyResult<()> {
        let Some(r) = &state.reader else {
            return Ok(());
        };
        let now = Shown {
            snaplen: r.info.snaplen,
            linktypes: r.info.linktypes.len(),
            taken: self.taken.load(Ordering::Relaxed),
        };
        if now == state.shown {
            return Ok(());
        }
        let info = self.info.bind(py);
        if now.snaplen != state.shown.snaplen {
            info.setattr("snaplen", now.snaplen)?;
        }
        if now.linktypes != state.shown.linktypes {
            let links: Vec<u32> = r.info.linktypes.iter().copied().collect();
            info.getattr("linktypes")?
                .call_method1("update", (links,))?;
        }
        if now.taken != state.shown.taken {
            info.setattr("read_bytes", now.taken)?;
        }
        state.shown = now;
        Ok(())
    }
}
