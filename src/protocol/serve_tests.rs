use serde::Deserialize;

use super::*;
use crate::history::Mode;
use ops::{RedoRequest, ShutdownRequest, StatusRequest, UndoMode, UndoRequest};

/// Reads `params` as request `R` of method `m`.
fn read<R: DeserializeOwned + JsonSchema>(
    params: &Value,
    envelope: &[&str],
) -> Result<Params<R>, Failure> {
    Params::of(Some(params), "m", envelope)
}

fn check<R: DeserializeOwned + JsonSchema>(
    params: &Value,
    envelope: &[&str],
) -> Result<(), String> {
    read::<R>(params, envelope)
        .map(|_| ())
        .map_err(|f| f.message)
}

#[test]
fn params_are_an_object_absent_or_null_with_known_names_only() {
    assert!(Params::<StatusRequest>::of(None, "status", SESSION).is_ok());
    assert!(check::<ShutdownRequest>(&Value::Null, &[]).is_ok());
    assert!(check::<StatusRequest>(&json!({"session": "s1"}), SESSION).is_ok());
    for bad in [json!(["s1"]), json!("s1"), json!(1), json!(true)] {
        let f = read::<StatusRequest>(&bad, SESSION).err().unwrap();
        assert_eq!(
            (f.code, f.param.as_deref()),
            (-32602, Some("params")),
            "{bad}"
        );
    }
    let f = Params::<RedoRequest>::of(Some(&json!({"forse": true})), "undo", SESSION)
        .err()
        .unwrap();
    assert_eq!(f.param.as_deref(), Some("forse"));
    assert_eq!(
        f.message,
        "invalid params: unknown parameter \"forse\": undo takes session, force"
    );
    assert!(
        check::<ShutdownRequest>(&json!({"x": 1}), &[])
            .unwrap_err()
            .contains("takes no parameters")
    );
}

/// Parameters of each type.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Typed {
    s: Option<String>,
    b: Option<bool>,
    n: Option<u64>,
    huge: Option<u64>,
    null: Option<String>,
    absent: Option<u64>,
}

/// Integers, given other values.
#[allow(dead_code, reason = "only their errors are looked at")]
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Integers {
    neg: Option<u64>,
    frac: Option<u64>,
    big: Option<u64>,
    s: Option<u64>,
    b: Option<u64>,
}

/// A boolean and a string, given other values.
#[allow(dead_code, reason = "only their errors are looked at")]
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Others {
    s: Option<bool>,
    n: Option<String>,
}

/// A parameter that must be given.
#[allow(dead_code, reason = "only their errors are looked at")]
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Required {
    /// A thing. More about it.
    absent: String,
}

#[test]
fn every_value_is_checked_against_its_type_and_null_is_absent() {
    let v = json!({"s": "x", "b": true, "n": 5, "neg": -1, "frac": 2.5, "big": 1e30,
        "huge": u64::MAX, "null": null, "m": "files", "bad_m": "all"});
    assert!(read::<Typed>(&v, &[]).is_err(), "unknown names are refused");
    let given = json!({"s": "x", "b": true, "n": 5, "huge": u64::MAX, "null": null});
    let p = read::<Typed>(&given, &[]).ok().unwrap().request;
    assert_eq!(p.s.as_deref(), Some("x"));
    assert_eq!(p.b, Some(true));
    assert_eq!(p.n, Some(5));
    assert_eq!(p.huge, Some(u64::MAX));
    assert_eq!(p.null, None);
    assert_eq!(p.absent, None);
    for n in ["neg", "frac", "big", "s", "b"] {
        let f = read::<Integers>(&json!({n: v[n]}), &[]).err().unwrap();
        assert_eq!(f.param.as_deref(), Some(n));
        assert!(
            f.message.contains("must be a non-negative integer"),
            "{}",
            f.message
        );
    }
    assert_eq!(
        read::<Others>(&json!({"s": "x"}), &[])
            .err()
            .unwrap()
            .message,
        "invalid params: \"s\" must be a boolean (got \"x\")"
    );
    assert!(read::<Others>(&json!({"n": 5}), &[]).is_err());
    let f = read::<Required>(&json!({}), &[]).err().unwrap();
    assert_eq!(f.param.as_deref(), Some("absent"));
    assert_eq!(
        f.message,
        "invalid params: \"absent\" is required (a thing)"
    );
    assert!(read::<Required>(&json!({"absent": null}), &[]).is_err());
    let files = read::<UndoRequest>(&json!({"mode": "files"}), &[])
        .ok()
        .unwrap();
    assert_eq!(files.request.mode, Some(UndoMode::Files));
    for bad in [json!({"mode": 5}), json!({"mode": "all"})] {
        let f = read::<UndoRequest>(&bad, &[]).err().unwrap();
        assert_eq!(f.param.as_deref(), Some("mode"));
        assert!(
            f.message
                .contains("must be one of \"both\", \"files\", \"conversation\""),
            "{}",
            f.message
        );
    }
    let none = Params::<UndoRequest>::of(None, "m", &[]).ok().unwrap();
    assert_eq!(none.request.mode.map_or(Mode::Both, UndoMode::mode), Mode::Both);
}

#[test]
fn the_session_handle_is_the_servers_and_checked_as_a_string() {
    let p = read::<UndoRequest>(&json!({"session": "s1", "force": true}), SESSION)
        .ok()
        .unwrap();
    assert_eq!(
        (p.session.as_deref(), p.request.force),
        (Some("s1"), Some(true))
    );
    let f = read::<UndoRequest>(&json!({"session": 1}), SESSION)
        .err()
        .unwrap();
    assert_eq!(f.param.as_deref(), Some("session"));
    assert_eq!(
        f.message,
        "invalid params: \"session\" must be a string (got 1)"
    );
    // A method without the envelope does not take it.
    assert!(read::<ShutdownRequest>(&json!({"session": "s1"}), &[]).is_err());
}

#[test]
fn a_long_value_is_shown_cut_on_a_character_boundary() {
    let long = json!("é".repeat(200));
    let s = shown(&long);
    assert!(s.ends_with('…') && s.chars().count() == 61, "{s}");
    assert_eq!(shown(&json!(42)), "42");
}

#[test]
fn every_method_is_registered_once() {
    let mut names: Vec<&str> = METHODS.iter().map(|(n, _)| *n).collect();
    names.sort_unstable();
    let all = names.len();
    names.dedup();
    assert_eq!(names.len(), all, "{names:?}");
    assert_eq!(
        names,
        [
            "begin_step",
            "begin_turn",
            "blame",
            "checkpoint",
            "diff",
            "end_step",
            "end_turn",
            "file_history",
            "log",
            "navigate",
            "open",
            "redo",
            "restore_paths",
            "revert",
            "round",
            "show",
            "shutdown",
            "status",
            "undo",
            "wait_before"
        ]
    );
}
