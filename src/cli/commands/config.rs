//! `retrace config`: every setting's effective value and where it came from.

use std::path::PathBuf;

use anyhow::Result;

use crate::cli::commands::Ctx;
use crate::cli::exit::OK;
use crate::cli::json;
use crate::object::{terminal_line, terminal_text};

/// Show every setting, its value and where it came from
#[derive(clap::Args)]
pub struct ConfigArgs {}

/// Runs `retrace config`.
pub fn run(_: ConfigArgs, cx: &Ctx) -> Result<u8> {
    config(cx.dir(), cx.json)
}

/// `retrace config`.
pub fn config(dir: Option<&PathBuf>, json: bool) -> Result<u8> {
    let dir = dir.cloned().unwrap_or_else(|| PathBuf::from("."));
    let root = crate::home::resolve_root(&dir, &crate::home::default_home())?.path;
    let (s, warnings) = crate::config::Settings::load(Some(&root));
    for w in &warnings {
        eprintln!("retrace: warning: {}", terminal_text(w));
    }
    let (home, source) = crate::home::default_home_and_source();
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
            serde_json::json!(crate::config::user_file().map(|p| p.display().to_string()));
        v["project_file"] = serde_json::json!(root.join(".retrace.toml").display().to_string());
        json::answer("config", v)?;
    } else {
        let from = match source {
            "RETRACE_HOME" => "from RETRACE_HOME",
            "XDG_STATE_HOME" => "$XDG_STATE_HOME/retrace",
            _ => "default: ~/.local/state/retrace",
        };
        let shown = |p: &std::path::Path| terminal_line(&p.to_string_lossy()).into_owned();
        let rows: Vec<(String, String, String)> =
            std::iter::once(("home".to_string(), shown(&home), from.to_string()))
                .chain(s.rows().into_iter().map(|(k, v, src)| {
                    let v = if k == "runtime_dir" {
                        format!("{runtime:?}")
                    } else {
                        v
                    };
                    (k.to_string(), v, src.to_string())
                }))
                .collect();
        let key = rows.iter().map(|r| r.0.len()).max().unwrap_or(0);
        // Long values (paths) overflow their column rather than push every source right.
        let value = rows
            .iter()
            .map(|r| r.1.chars().count())
            .filter(|&w| w <= 16)
            .max()
            .unwrap_or(0);
        for (k, v, src) in &rows {
            println!(
                "{}",
                terminal_line(&format!("{k:<key$}  {v:<value$}  ({src})"))
            );
        }
        let exists = |p: &std::path::Path| {
            if p.is_file() { "exists" } else { "none yet" }
        };
        println!();
        if let Some(u) = crate::config::user_file() {
            println!("user file     {} ({})", shown(&u), exists(&u));
        }
        let project = root.join(".retrace.toml");
        println!("project file  {} ({})", shown(&project), exists(&project));
        println!(
            "To change a value, write `name = value` in either file (TOML; the project's wins \
             over yours). Most settings can also be set in the environment, as RETRACE_ and \
             the name in capitals (RETRACE_RETENTION_DAYS=14), which wins over both; \
             docs/retention.md lists them."
        );
    }
    Ok(OK)
}
