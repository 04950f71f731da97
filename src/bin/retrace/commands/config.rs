//! `retrace config`: every setting's effective value and where it came from.

use std::path::PathBuf;

use anyhow::Result;
use retrace::object::{terminal_line, terminal_text};

use super::print_json;
use crate::OK;

/// `retrace config`.
pub fn config(dir: Option<&PathBuf>, json: bool) -> Result<u8> {
    let dir = dir.cloned().unwrap_or_else(|| PathBuf::from("."));
    let root = retrace::home::resolve_root(&dir, &retrace::home::default_home())?.path;
    let (s, warnings) = retrace::config::Settings::load(Some(&root));
    for w in &warnings {
        eprintln!("retrace: warning: {}", terminal_text(w));
    }
    let (home, source) = retrace::home::default_home_and_source();
    // The effective value: an unset runtime directory is the one under the home.
    let runtime = match s.runtime_dir.value.as_str() {
        "" => home.join("runtime").display().to_string(),
        d => d.to_string(),
    };
    if json {
        let mut v = serde_json::to_value(&s)?;
        v["home"] = serde_json::json!(home.display().to_string());
        v["home_source"] = serde_json::json!(source);
        v["runtime_dir"]["value"] = serde_json::json!(runtime);
        v["user_file"] =
            serde_json::json!(retrace::config::user_file().map(|p| p.display().to_string()));
        v["project_file"] = serde_json::json!(root.join(".retrace.toml").display().to_string());
        print_json(&v);
    } else {
        let from = match source {
            "RETRACE_HOME" => "from RETRACE_HOME",
            "XDG_STATE_HOME" => "$XDG_STATE_HOME/retrace",
            _ => "default: ~/.local/state/retrace",
        };
        let shown = |p: &std::path::Path| terminal_line(&p.to_string_lossy()).into_owned();
        println!("{:<17} {:<14} ({from})", "home", shown(&home));
        for (k, v, src) in s.rows() {
            let v = if k == "runtime_dir" {
                format!("{runtime:?}")
            } else {
                v
            };
            println!("{}", terminal_line(&format!("{k:<17} {v:<14} ({src})")));
        }
        if let Some(u) = retrace::config::user_file() {
            println!("user file         {}", shown(&u));
        }
        println!("project file      {}", shown(&root.join(".retrace.toml")));
    }
    Ok(OK)
}
