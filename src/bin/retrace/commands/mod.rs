//! One module per command group. Each command takes what `main` opened (a workspace or a
//! session), calls the library, prints, and returns its exit code.

pub mod agents;
pub mod config;
pub mod demo;
pub mod docs;
pub mod history;
pub mod inspect;
pub mod maintenance;
pub mod snapshot;

/// Prints one JSON value on a line.
pub fn print_json(v: &serde_json::Value) {
    println!("{v}");
}

/// `YYYY-MM-DD HH:MM:SS` UTC from Unix milliseconds.
pub fn format_time(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil-from-days (Howard Hinnant's algorithm), valid for all dates after 1970.
    let z = days.cast_signed() + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}
