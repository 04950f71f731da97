//! `retrace`: the command-line interface. Its code is the library's `cli` module (the `cli`
//! feature, on by default), which shares the library's internals without making them API.

fn main() -> std::process::ExitCode {
    retrace::cli::main()
}
