use super::*;

fn check(params: &Value, names: &[&str]) -> Result<(), String> {
    Params::of(Some(params), "m", names)
        .map(|_| ())
        .map_err(|f| f.message)
}

#[test]
fn params_are_an_object_absent_or_null_with_known_names_only() {
    assert!(Params::of(None, "status", &["session"]).is_ok());
    assert!(check(&Value::Null, &[]).is_ok());
    assert!(check(&json!({"session": "s1"}), &["session"]).is_ok());
    for bad in [json!(["s1"]), json!("s1"), json!(1), json!(true)] {
        let f = Params::of(Some(&bad), "m", &["session"]).err().unwrap();
        assert_eq!(
            (f.code, f.param.as_deref()),
            (-32602, Some("params")),
            "{bad}"
        );
    }
    let f = Params::of(Some(&json!({"forse": true})), "undo", &["session", "force"])
        .err()
        .unwrap();
    assert_eq!(f.param.as_deref(), Some("forse"));
    assert_eq!(
        f.message,
        "invalid params: unknown parameter \"forse\": undo takes session, force"
    );
    assert!(
        check(&json!({"x": 1}), &[])
            .unwrap_err()
            .contains("takes no parameters")
    );
}

#[test]
fn every_value_is_checked_against_its_type_and_null_is_absent() {
    let v = json!({"s": "x", "b": true, "n": 5, "neg": -1, "frac": 2.5, "big": 1e30,
        "huge": u64::MAX, "null": null, "m": "files", "bad_m": "all"});
    let p = Params::of(Some(&v), "m", &[]).err().map(|_| ());
    assert!(p.is_some(), "unknown names are refused");
    let names: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    let p = Params::of(Some(&v), "m", &names).ok().unwrap();
    assert_eq!(p.str("s").ok().flatten(), Some("x"));
    assert_eq!(p.bool("b").ok().flatten(), Some(true));
    assert_eq!(p.u64("n").ok().flatten(), Some(5));
    assert_eq!(p.u64("huge").ok().flatten(), Some(u64::MAX));
    assert_eq!(p.str("null").ok().flatten(), None);
    assert_eq!(p.u64("absent").ok().flatten(), None);
    for n in ["neg", "frac", "big", "s", "b"] {
        let f = p.u64(n).err().unwrap();
        assert_eq!(f.param.as_deref(), Some(n));
        assert!(
            f.message.contains("must be a non-negative integer"),
            "{}",
            f.message
        );
    }
    assert_eq!(
        p.bool("s").err().unwrap().message,
        "invalid params: \"s\" must be a boolean (got \"x\")"
    );
    assert!(p.str("n").is_err());
    assert!(
        p.required("absent", "a thing")
            .err()
            .unwrap()
            .message
            .contains("required")
    );
    let files = json!({"mode": "files"});
    let modes = Params::of(Some(&files), "m", &["mode"]).ok().unwrap();
    assert_eq!(modes.mode().ok(), Some(Mode::Files));
    for bad in [json!({"mode": 5}), json!({"mode": "all"})] {
        let f = Params::of(Some(&bad), "m", &["mode"])
            .ok()
            .unwrap()
            .mode()
            .err()
            .unwrap();
        assert_eq!(f.param.as_deref(), Some("mode"));
    }
    let none = Params::of(None, "m", &["mode"]).ok().unwrap();
    assert_eq!(none.mode().ok(), Some(Mode::Both));
}

#[test]
fn a_long_value_is_shown_cut_on_a_character_boundary() {
    let long = json!("é".repeat(200));
    let s = shown(&long);
    assert!(s.ends_with('…') && s.chars().count() == 61, "{s}");
    assert_eq!(shown(&json!(42)), "42");
}
