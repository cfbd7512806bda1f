//! The parser's entry point on arbitrary bytes: any capture file, however
//! damaged, must parse without a panic (the libFuzzer target; see README.md).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut settings = _native::default_settings();
    // Small bounds so that the fuzzer reaches every limit's code path.
    settings.tcp.max_pending_segments = 8;
    settings.tcp.max_pending_bytes = 4096;
    settings.tcp.head_bytes = 512;
    settings.max_ip_reassemblies = 4;
    settings.max_pending_calls = 16;
    let bytes = data.to_vec();
    let opener: _native::capture::Opener = Box::new(move |_| {
        Ok(_native::capture::Source::Stream(Box::new(
            std::io::Cursor::new(bytes.clone()),
        )))
    });
    let _ = _native::parse_sources(vec![opener], settings, &mut |_| {});
});
