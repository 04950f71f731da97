//! `retrace-dump`: inspect stores read-only — stats, trees, objects, integrity. Its code is
//! the library's `cli::dump` module (the `cli` feature, on by default).

// The static musl build allocates through mimalloc: musl's own malloc serialises threads
// (docs/platforms.md, "The C library"); elsewhere the C library's malloc serves.
#[cfg(target_env = "musl")]
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    retrace::cli::dump::main()
}
