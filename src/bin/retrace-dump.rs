//! `retrace-dump`: inspect stores read-only — stats, trees, objects, integrity. Its code is
//! the library's `cli::dump` module (the `cli` feature, on by default).

fn main() -> std::process::ExitCode {
    retrace::cli::dump::main()
}
