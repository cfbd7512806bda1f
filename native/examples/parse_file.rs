//! Parse capture files with default settings and print a summary (profiling aid).
fn main() {
    let paths: Vec<String> = std::env::args().skip(1).collect();
    let sources: Vec<_native::capture::Opener> = paths
        .iter()
        .map(|p| {
            let p = p.clone();
            Box::new(move |_| {
                std::fs::File::open(&p)
                    .map(|f| _native::capture::file_source(f, Default::default()))
                    .map_err(|e| format!("cannot open: {e}"))
            }) as _native::capture::Opener
        })
        .collect();
    let t = std::time::Instant::now();
    let (d, infos) =
        _native::parse_sources(sources, _native::default_settings(), &mut |_| {}).expect("parse");
    let frames: u64 = infos.iter().map(|i| i.frames).sum();
    println!(
        "{} frames, {} messages, {} events in {:.3} s",
        frames,
        d.col.cols.ts_first.len(),
        d.col.events.ts.len(),
        t.elapsed().as_secs_f64()
    );
}
