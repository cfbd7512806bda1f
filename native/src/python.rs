//! The Python module `nfstrace._native` (PyO3): `parse`, returning plain
//! columns (bytes of int arrays, lists of distinct values) that
//! `nfstrace/parsers/native.py` turns into the parser's DataFrames; and the
//! capture reader alone, `Frames` (frames.rs).

use crate::collector::{Col, Collector};
use crate::dissector::{Dissector, Settings};
use crate::tcp::{Limits, EVENT_KIND_NAMES};
use crate::{capture, parse_sources};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use std::fs::File;
use std::io::Read;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

/// A Python callable `read(n) -> bytes` as a Read (decompressing streams:
/// Python's gzip/bz2/lzma say best what went wrong with a damaged file; live
/// streams, `frames.rs`).
pub(crate) struct PyRead {
    read: PyObject,
    pending: Vec<u8>,
    at: usize,
    /// bytes asked of `read` at least (fewer a call would cost more than it reads)
    min: usize,
    /// bytes taken from the capture so far: `taken()` when given (the packed
    /// bytes of a compressed file), else the bytes `read` returned
    counted: Option<(Option<PyObject>, Arc<AtomicU64>)>,
}

impl PyRead {
    pub(crate) fn new(read: PyObject, min: usize) -> PyRead {
        PyRead {
            read,
            pending: Vec::new(),
            at: 0,
            min,
            counted: None,
        }
    }

    /// The bytes taken so far kept in `taken` (see PyRead::counted).
    pub(crate) fn counting(mut self, taken_fn: Option<PyObject>, taken: Arc<AtomicU64>) -> Self {
        self.counted = Some((taken_fn, taken));
        self
    }
}

impl Read for PyRead {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if self.at >= self.pending.len() {
            let want = out.len().max(self.min);
            let pending = &mut self.pending;
            Python::with_gil(|py| -> PyResult<()> {
                let b = self.read.call1(py, (want,))?;
                pending.clear();
                pending.extend_from_slice(b.bind(py).downcast::<PyBytes>()?.as_bytes());
                match &self.counted {
                    Some((Some(taken_fn), taken)) => {
                        taken.store(taken_fn.call0(py)?.extract(py)?, Ordering::Relaxed)
                    }
                    Some((None, taken)) => {
                        taken.fetch_add(pending.len() as u64, Ordering::Relaxed);
                    }
                    None => {}
                }
                Ok(())
            })
            .map_err(|e| std::io::Error::other(e.to_string()))?;
            self.at = 0;
            if self.pending.is_empty() {
                return Ok(0);
            }
        }
        let n = out.len().min(self.pending.len() - self.at);
        out[..n].copy_from_slice(&self.pending[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

fn get<'py, T: FromPyObject<'py>>(d: &Bound<'py, PyDict>, key: &str) -> PyResult<T> {
    d.get_item(key)?
        .ok_or_else(|| PyValueError::new_err(format!("missing setting {key}")))?
        .extract()
}

fn settings(d: &Bound<'_, PyDict>) -> PyResult<Settings> {
    Ok(Settings {
        tcp: Limits {
            head_bytes: get(d, "head_bytes")?,
            max_record_bytes: get(d, "max_record_bytes")?,
            max_pending_segments: get(d, "max_pending_segments")?,
            max_pending_bytes: get(d, "max_pending_bytes")?,
            max_pending_bytes_total: get(d, "max_pending_bytes_total")?,
            max_hole_age_ns: get(d, "max_hole_age_ns")?,
            max_unsynced_bytes: get(d, "max_unsynced_bytes")?,
            max_ack_waiting: get(d, "max_ack_waiting")?,
            max_unframed_records: get(d, "max_unframed_records")?,
        },
        max_frame_bytes: get(d, "max_frame_bytes")?,
        max_interface_drops: get(d, "max_interface_drops")?,
        max_messages: get(d, "max_messages")?,
        check_every_frames: get(d, "check_every_frames")?,
        ip_reassembly_timeout_ns: get(d, "ip_reassembly_timeout_ns")?,
        max_ip_reassemblies: get(d, "max_ip_reassemblies")?,
        max_ip_reassembly_bytes: get(d, "max_ip_reassembly_bytes")?,
        max_fragments_per_datagram: get(d, "max_fragments_per_datagram")?,
        max_pending_calls: get(d, "max_pending_calls")?,
        max_connections: get(d, "max_connections")?,
        max_directions: get(d, "max_directions")?,
        max_events_per_kind: get(d, "max_events_per_kind")?,
        duplicate_window_ns: get(d, "duplicate_window_ns")?,
        send_gap_ns: get(d, "send_gap_ns")?,
        partitions: get(d, "partitions")?,
        partition: get(d, "partition")?,
        buckets: get(d, "buckets")?,
    })
}

/// Move a column into `out[name]` as bytes (native byte order), freeing it.
fn put<T: bytemuck::Pod>(
    py: Python<'_>,
    out: &Bound<'_, PyDict>,
    name: &str,
    v: &mut Vec<T>,
) -> PyResult<()> {
    let b = PyBytes::new(py, bytemuck::cast_slice(v.as_slice()));
    *v = Vec::new();
    out.set_item(name, b)
}

/// A column's mapping, read by numpy in place (`np.frombuffer`): the bytes
/// Python holds of a messages column, without a copy (column.rs).  Read-only;
/// unmapped when the last array over it is freed.
#[pyclass(frozen, module = "nfstrace._native")]
struct ColumnBytes {
    map: Option<memmap2::Mmap>,
    len: usize,
}

#[pymethods]
impl ColumnBytes {
    /// # Safety
    /// Called by Python with a view to fill (the buffer protocol).
    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut pyo3::ffi::Py_buffer,
        flags: std::os::raw::c_int,
    ) -> PyResult<()> {
        if flags & pyo3::ffi::PyBUF_WRITABLE != 0 {
            return Err(pyo3::exceptions::PyBufferError::new_err(
                "a parsed column is read-only",
            ));
        }
        let me = slf.get();
        let start: *const u8 = match &me.map {
            Some(m) => m.as_ptr(),
            None => std::ptr::NonNull::dangling().as_ptr(), // (no byte is read of it)
        };
        let len = me.len as pyo3::ffi::Py_ssize_t;
        // SAFETY: view is Python's to fill; FillInfo takes a reference to the
        // object, which keeps the mapping (and so start) alive while viewed
        if unsafe {
            pyo3::ffi::PyBuffer_FillInfo(view, slf.as_ptr(), start as *mut _, len, 1, flags)
        } != 0
        {
            return Err(PyErr::fetch(slf.py()));
        }
        Ok(())
    }

    fn __len__(&self) -> usize {
        self.len
    }

    /// Equal to the same bytes (as `bytes` compares: the tests compare parses).
    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        match other.downcast::<ColumnBytes>() {
            Ok(o) => self.bytes() == o.get().bytes(),
            Err(_) => other.extract::<&[u8]>().is_ok_and(|b| b == self.bytes()),
        }
    }

    fn __bytes__<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, self.bytes())
    }
}

impl ColumnBytes {
    fn bytes(&self) -> &[u8] {
        self.map.as_ref().map_or(&[], |m| &m[..self.len])
    }
}

/// Move a messages column into `out[name]` as a ColumnBytes (no copy).
fn put_col<T: bytemuck::Pod>(
    py: Python<'_>,
    out: &Bound<'_, PyDict>,
    name: &str,
    c: &mut Col<T>,
) -> PyResult<()> {
    let (map, len) = c.take();
    // (read-only from here: numpy's arrays over it are not writeable either)
    let map = map.map(|m| m.make_read_only()).transpose()?;
    out.set_item(name, Bound::new(py, ColumnBytes { map, len })?)
}

/// Hand the pages of freed memory back to the system.  glibc keeps freed
/// blocks in its heap, resident: without this the parser's state (its streams,
/// calls and interners, freed once the tables are handed over) would stay
/// resident beside the tables the analysis builds.
fn release_freed() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        extern "C" {
            fn malloc_trim(pad: usize) -> std::os::raw::c_int;
        }
        // SAFETY: malloc_trim only returns free memory to the system
        unsafe {
            malloc_trim(0);
        }
    }
}

fn byte_list<'py>(py: Python<'py>, values: &[Vec<u8>]) -> PyResult<Bound<'py, PyList>> {
    PyList::new(py, values.iter().map(|v| PyBytes::new(py, v)))
}

fn messages(py: Python<'_>, col: &mut Collector) -> PyResult<PyObject> {
    let out = PyDict::new(py);
    let c = &mut col.cols;
    put_col(py, &out, "ts_first_ns", &mut c.ts_first)?;
    put_col(py, &out, "ts_last_ns", &mut c.ts_last)?;
    put_col(py, &out, "frame_first", &mut c.frame_first)?;
    put_col(py, &out, "frame_last", &mut c.frame_last)?;
    put_col(py, &out, "src", &mut c.src)?;
    put_col(py, &out, "sport", &mut c.sport)?;
    put_col(py, &out, "dst", &mut c.dst)?;
    put_col(py, &out, "dport", &mut c.dport)?;
    put_col(py, &out, "transport", &mut c.transport)?;
    put_col(py, &out, "conn", &mut c.conn)?;
    put_col(py, &out, "xid", &mut c.xid)?;
    put_col(py, &out, "msgtype", &mut c.msgtype)?;
    put_col(py, &out, "prog", &mut c.prog)?;
    put_col(py, &out, "vers", &mut c.vers)?;
    put_col(py, &out, "proc", &mut c.proc_)?;
    put_col(py, &out, "auth", &mut c.auth)?;
    put_col(py, &out, "auth_uid", &mut c.auth_uid)?;
    put_col(py, &out, "auth_gid", &mut c.auth_gid)?;
    put_col(py, &out, "auth_machine", &mut c.auth_machine)?;
    put_col(py, &out, "gss_proc", &mut c.gss_proc)?;
    put_col(py, &out, "gss_service", &mut c.gss_service)?;
    put_col(py, &out, "reply_stat", &mut c.reply_stat)?;
    put_col(py, &out, "accept_stat", &mut c.accept_stat)?;
    put_col(py, &out, "reject_stat", &mut c.reject_stat)?;
    put_col(py, &out, "body_offset", &mut c.body_offset)?;
    put_col(py, &out, "rpc_len", &mut c.rpc_len)?;
    put_col(py, &out, "captured_len", &mut c.captured_len)?;
    put_col(py, &out, "record_frags", &mut c.record_frags)?;
    put_col(py, &out, "frames", &mut c.frames)?;
    put_col(py, &out, "ip_frags", &mut c.ip_frags)?;
    put_col(py, &out, "truncated", &mut c.truncated)?;
    put_col(py, &out, "nfs_kind", &mut c.nfs_kind)?;
    put_col(py, &out, "ops", &mut c.ops)?;
    put_col(py, &out, "op_status", &mut c.op_status)?;
    put_col(py, &out, "nfs_status", &mut c.nfs_status)?;
    put_col(py, &out, "fh", &mut c.fh)?;
    put_col(py, &out, "name", &mut c.name)?;
    put_col(py, &out, "offset", &mut c.offset)?;
    put_col(py, &out, "count", &mut c.count)?;
    put_col(py, &out, "stable", &mut c.stable)?;
    put_col(py, &out, "committed", &mut c.committed)?;
    put_col(py, &out, "verifier", &mut c.verifier)?;
    put_col(py, &out, "eof", &mut c.eof)?;
    put_col(py, &out, "session", &mut c.session)?;
    put_col(py, &out, "slot", &mut c.slot)?;
    put_col(py, &out, "seqid", &mut c.seqid)?;
    put_col(py, &out, "minor", &mut c.minor)?;
    put_col(py, &out, "nfs_decode", &mut c.nfs_decode)?;
    put(py, &out, "acked_row", &mut col.acked_rows)?;
    put(py, &out, "acked_ts", &mut col.acked_ts)?;
    Ok(out.into_any().unbind())
}

fn events(py: Python<'_>, col: &mut Collector) -> PyResult<PyObject> {
    let out = PyDict::new(py);
    let e = &mut col.events;
    put(py, &out, "ts_ns", &mut e.ts)?;
    put(py, &out, "frame", &mut e.frame)?;
    put(py, &out, "conn", &mut e.conn)?;
    put(py, &out, "src", &mut e.src)?;
    put(py, &out, "sport", &mut e.sport)?;
    put(py, &out, "dst", &mut e.dst)?;
    put(py, &out, "dport", &mut e.dport)?;
    put(py, &out, "kind", &mut e.kind)?;
    put(py, &out, "seq", &mut e.seq)?;
    put(py, &out, "length", &mut e.length)?;
    put(py, &out, "duration_ns", &mut e.duration)?;
    out.set_item("kind_names", PyList::new(py, EVENT_KIND_NAMES.iter())?)?;
    Ok(out.into_any().unbind())
}

fn tables(py: Python<'_>, col: &Collector) -> PyResult<PyObject> {
    let out = PyDict::new(py);
    let addrs: Vec<Vec<u8>> = col
        .addrs
        .values
        .iter()
        .map(|a| a.as_bytes().to_vec())
        .collect();
    out.set_item("addrs", byte_list(py, &addrs)?)?;
    out.set_item("machines", byte_list(py, &col.machines.values)?)?;
    out.set_item("fhs", byte_list(py, &col.fhs.values)?)?;
    out.set_item("names", byte_list(py, &col.names.values)?)?;
    out.set_item("verifiers", byte_list(py, &col.verifiers.values)?)?;
    out.set_item("sessions", byte_list(py, &col.sessions.values)?)?;
    out.set_item("op_lists", PyList::new(py, col.op_lists.values.iter())?)?;
    out.set_item(
        "status_lists",
        PyList::new(py, col.status_lists.values.iter())?,
    )?;
    Ok(out.into_any().unbind())
}

fn stats(py: Python<'_>, d: &Dissector) -> PyResult<PyObject> {
    let out = PyDict::new(py);
    out.set_item("frames", d.n_frames)?;
    out.set_item("duplicate_frames", d.n_dup)?;
    let c = &d.counts;
    out.set_item("ipv4_packets", c.ipv4)?;
    out.set_item("ipv6_packets", c.ipv6)?;
    out.set_item("tcp_packets", c.tcp)?;
    out.set_item("udp_packets", c.udp)?;
    out.set_item("other_ip_packets", c.other)?;
    out.set_item("non_ip_frames", c.non_ip)?;
    out.set_item("short_transport_headers", c.short)?;
    let f = &d.reasm.stats;
    out.set_item("ip_fragments", f.fragments)?;
    out.set_item("ip_datagrams_reassembled", f.reassembled)?;
    out.set_item("ip_datagrams_incomplete", f.incomplete)?;
    let tcp = PyDict::new(py);
    for (k, v) in d.tcp.stats.items() {
        tcp.set_item(k, v)?;
    }
    out.set_item("tcp", tcp)?;
    out.set_item("tcp_connections", d.n_tcp_conns)?;
    out.set_item("connection_frames", &d.conn_frames)?;
    out.set_item("tcp_window_scale_unknown", d.window_scale_unknown())?;
    let anomalies = PyDict::new(py);
    for (name, n) in d.anomalies() {
        anomalies.set_item(name, n)?;
    }
    out.set_item("anomalies", anomalies)?;
    let m = &d.col.stats;
    out.set_item("messages", m.messages)?;
    out.set_item("calls", m.calls)?;
    out.set_item("replies", m.replies)?;
    out.set_item("truncated_messages", m.truncated_messages)?;
    out.set_item("incomplete_messages", m.incomplete_messages)?;
    out.set_item("headerless_messages", m.headerless_messages)?;
    out.set_item("not_rpc_records", m.not_rpc_records)?;
    out.set_item("replies_without_call_info", m.replies_without_call_info)?;
    // per-direction facts, sorted by (src, dst) as bytes
    let mut order: Vec<usize> = (1..d.facts.keys.len()).collect(); // 0: the overflow slot
    order.sort_by(|&a, &b| d.facts.keys[a].cmp(&d.facts.keys[b]));
    let dirs = PyList::empty(py);
    for i in order {
        let (s, t) = d.facts.keys[i];
        dirs.append((
            PyBytes::new(py, s.as_bytes()),
            PyBytes::new(py, t.as_bytes()),
            d.facts.rows[i].to_vec(),
        ))?;
    }
    out.set_item("directions", dirs)?;
    Ok(out.into_any().unbind())
}

/// What the reader learned about one file, as a dict (capture.py's
/// take_facts fills a CaptureInfo with it).
pub(crate) fn file_info<'py>(
    py: Python<'py>,
    f: &capture::FileInfo,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("format", f.format)?;
    d.set_item(
        "linktypes",
        f.linktypes.iter().copied().collect::<Vec<u32>>(),
    )?;
    d.set_item("snaplen", f.snaplen)?;
    d.set_item("frames", f.frames)?;
    d.set_item("bytes", f.bytes)?;
    d.set_item("truncated_frames", f.truncated_frames)?;
    d.set_item("cut_len", f.cut_len)?;
    d.set_item("cut_headers", f.cut_headers)?;
    d.set_item("interface_drops", f.interface_drops)?;
    let damage = PyList::empty(py);
    for (kind, x) in &f.damage {
        damage.append((
            *kind,
            x.count,
            x.offset,
            x.skipped,
            x.detail.as_str(),
            x.what,
        ))?;
    }
    d.set_item("damage", damage)?;
    Ok(d)
}

fn file_infos(py: Python<'_>, infos: &[capture::FileInfo]) -> PyResult<PyObject> {
    let out = PyList::empty(py);
    for f in infos {
        out.append(file_info(py, f)?)?;
    }
    Ok(out.into_any().unbind())
}

/// ParseProgress(): how far a parse given it as its `progress` has come --
/// `frames` read and `bytes` read from the files it opened itself -- set by
/// the parse without taking the GIL, read from any thread.  For a parse on a
/// thread of its own (`nfstrace.parsers.ahead`): a callable there waited for
/// the GIL at every call while the main thread imported (~5 ms each, the
/// interpreter's switch interval: 0.06-0.13 s of a 1M-packet parse).
#[pyclass(frozen, module = "nfstrace._native")]
struct ParseProgress {
    frames: AtomicI64,
    bytes: AtomicU64,
}

#[pymethods]
impl ParseProgress {
    #[new]
    fn new() -> Self {
        ParseProgress {
            frames: AtomicI64::new(0),
            bytes: AtomicU64::new(0),
        }
    }

    #[getter]
    fn frames(&self) -> i64 {
        self.frames.load(Ordering::Relaxed)
    }

    #[getter]
    fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }
}

/// parse(paths, readers, settings, progress) -> dict
///
/// paths: capture files; readers: per file None (the file opened here, when
/// needed) or a callable that (re)opens it and returns a callable read(n) ->
/// bytes (a decompressing stream); settings: the
/// ParseLimits values; progress: None, a ParseProgress, or callable(frames,
/// bytes read here from the files it opened itself: not those of ``readers``)
/// -- called with the GIL, so that it can raise KeyboardInterrupt.
/// Raises ValueError("<index>:<message>") when a file is not a capture.
#[pyfunction]
#[pyo3(signature = (paths, readers, settings, progress=None))]
fn parse(
    py: Python<'_>,
    paths: Vec<String>,
    readers: Vec<Option<PyObject>>,
    settings: &Bound<'_, PyDict>,
    progress: Option<PyObject>,
) -> PyResult<PyObject> {
    let settings = self::settings(settings)?;
    let mut sources: Vec<capture::Opener> = Vec::with_capacity(paths.len());
    let taken = Arc::new(AtomicU64::new(0));
    for (path, reader) in paths.iter().zip(readers) {
        match reader {
            // a compressed file: Python's opener (re)opens it, returning read(n)
            Some(opener) => sources.push(Box::new(move |_| {
                let read = Python::with_gil(|py| opener.call0(py)).map_err(|e| e.to_string())?;
                Ok(capture::Source::Stream(Box::new(PyRead::new(
                    read,
                    1 << 20,
                ))))
            })),
            None => {
                let path = path.clone();
                let taken = Arc::clone(&taken);
                sources.push(Box::new(move |counted| {
                    let file = File::open(&path).map_err(|e| format!("cannot open: {e}"))?;
                    let taken = if counted {
                        Arc::clone(&taken)
                    } else {
                        Arc::new(AtomicU64::new(0)) // read ahead of time: not progress
                    };
                    Ok(capture::file_source(file, taken)) // mapped, or read
                }));
            }
        }
    }
    // The Python error a progress callback raised (KeyboardInterrupt): the
    // parse goes on (no way to stop it cleanly mid-file), then it is raised.
    let mut interrupted: Option<PyErr> = None;
    let counter: Option<Py<ParseProgress>> = progress
        .as_ref()
        .and_then(|p| p.downcast_bound::<ParseProgress>(py).ok())
        .map(|p| p.clone().unbind());
    let result = py.allow_threads(|| {
        let mut tick = |n: i64| {
            if let Some(c) = &counter {
                let c = c.get();
                c.bytes
                    .store(taken.load(Ordering::Relaxed), Ordering::Relaxed);
                c.frames.store(n, Ordering::Relaxed);
            } else if let (Some(cb), None) = (&progress, &interrupted) {
                Python::with_gil(|py| {
                    let bytes = taken.load(Ordering::Relaxed);
                    if let Err(e) = cb.call1(py, (n, bytes)) {
                        interrupted = Some(e);
                    }
                });
            }
        };
        parse_sources(sources, settings, &mut tick)
    });
    if let Some(e) = interrupted {
        return Err(e);
    }
    let (mut d, infos) = result.map_err(|(i, msg)| PyValueError::new_err(format!("{i}:{msg}")))?;
    let out = PyDict::new(py);
    out.set_item("stats", stats(py, &d)?)?;
    out.set_item("tables", tables(py, &d.col)?)?;
    out.set_item("messages", messages(py, &mut d.col)?)?;
    out.set_item("events", events(py, &mut d.col)?)?;
    out.set_item("files", file_infos(py, &infos)?)?;
    drop(d); // the parser's state: its memory back to the system too
    release_freed();
    Ok(out.into_any().unbind())
}

/// frame_partition(linktype, data, partitions) -> int: the partition of a
/// frame by its host pair (`ip::partition_of`; the parallel parse's sample).
#[pyfunction]
fn frame_partition(linktype: u32, data: &[u8], partitions: usize) -> usize {
    let (ver, off) = crate::link::locate_ip(linktype, data);
    crate::ip::partition_of(ver, data, off, partitions.max(1), &[])
}

/// frame_host_pair(linktype, data) -> (bytes, bytes) | None: a frame's two IP
/// addresses, the lower first; None when it is not IP or they were not
/// captured (the grouping of captures by their frames).
#[pyfunction]
fn frame_host_pair<'py>(
    py: Python<'py>,
    linktype: u32,
    data: &[u8],
) -> Option<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
    let (ver, off) = crate::link::locate_ip(linktype, data);
    crate::ip::host_pair(ver, data, off).map(|(a, b)| (PyBytes::new(py, a), PyBytes::new(py, b)))
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(parse, m)?)?;
    m.add_function(wrap_pyfunction!(frame_partition, m)?)?;
    m.add_function(wrap_pyfunction!(frame_host_pair, m)?)?;
    m.add_class::<crate::frames::Frames>()?;
    m.add_class::<ParseProgress>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    // The generated tables' names (tests/test_rust_tables.py: the extension was
    // built from the current Python definitions)
    m.add("EVENT_KINDS", EVENT_KIND_NAMES.to_vec())?;
    m.add("ANOMALIES", crate::tables::ANOMALY_NAMES.to_vec())?;
    Ok(())
}
