//! `retrace config`: every setting's effective value and where it came from.

use std::path::PathBuf;

use anyhow::Result;
use retrace::Config;

use super::print_json;
use crate::OK;

/// `retrace config`.
pub fn config(dir: Option<&PathBuf>, json: bool) -> Result<u8> {
    let dir = dir.cloned().unwrap_or_else(|| PathBuf::from("."));
    let root = retrace::home::resolve_root(&dir)?.path;
    let (s, warnings) = retrace::config::Settings::load(Some(&root));
    for w in &warnings {
        eprintln!("retrace: warning: {w}");
    }
    let home = Config::from_env().home().to_path_buf();
    if json {
        let mut v = serde_json::to_value(&s)?;
        v["home"] = serde_json::json!(home.display().to_string());
        v["user_file"] =
            serde_json::json!(retrace::config::user_file().map(|p| p.display().to_string()));
        v["project_file"] = serde_json::json!(root.join(".retrace.toml").display().to_string());
        print_json(&v);
    } else {
        println!("home              {} ", home.display());
        for (k, v, src) in s.rows() {
            println!("{k:<17} {v:<14} ({src})");
        }
        if let Some(u) = retrace::config::user_file() {
            println!("user file         {}", u.display());
        }
        println!("project file      {}", root.join(".retrace.toml").display());
    }
    Ok(OK)
}
