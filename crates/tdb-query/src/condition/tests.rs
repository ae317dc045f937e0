use super::*;
use crate::{Batch, FieldBuffer};
use tdb_format::Datatype;
use tdb_storage::LocalStorage;

fn load(case: &str) -> (ArraySchema, HashMap<String, Enumeration>) {
    let dir = tdb_testdata::root().join(case).join("array");
    let storage = LocalStorage::new(&dir);
    let history = tdb_fragment::load_schemas(&storage, "", None).unwrap();
    let entry = history.latest();
    let enums = tdb_fragment::load_referenced_enumerations(&storage, "", entry, None)
        .unwrap()
        .into_iter()
        .map(|e| (e.name.clone(), e))
        .collect();
    (entry.schema.clone(), enums)
}

fn cmp(field: &str, op: Op, value: &[u8]) -> Condition {
    Condition::Compare {
        field: field.into(),
        op,
        value: value.to_vec(),
    }
}

fn and(children: Vec<Condition>) -> Condition {
    Condition::Combination {
        op: Comb::And,
        children,
    }
}

fn or(children: Vec<Condition>) -> Condition {
    Condition::Combination {
        op: Comb::Or,
        children,
    }
}

fn err(expr: &str, schema: &ArraySchema) -> String {
    match parse(expr, schema) {
        Ok(c) => panic!("`{expr}` parsed: {c:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn trees_are_what_tiledb_py_builds() {
    let (s, _) = load("query_conditions_sparse");
    let i5 = 5i32.to_le_bytes();
    assert_eq!(parse("i > 5", &s).unwrap(), cmp("i", Op::Gt, &i5));
    // Field on the right flips the op.
    assert_eq!(parse("5 < i", &s).unwrap(), cmp("i", Op::Gt, &i5));
    assert_eq!(parse("5 == i", &s).unwrap(), cmp("i", Op::Eq, &i5));
    // Chained comparisons are an AND; same-op combinations flatten.
    assert_eq!(
        parse("1 < i <= 5 and d != -3", &s).unwrap(),
        and(vec![
            cmp("i", Op::Gt, &1i32.to_le_bytes()),
            cmp("i", Op::Le, &i5),
            cmp("d", Op::Ne, &(-3i32).to_le_bytes()),
        ])
    );
    // `&`/`|` need parenthesized comparisons; `or` binds loosest.
    assert_eq!(
        parse("(i > 5) & (f < 0.5) | (n == None)", &s).unwrap(),
        or(vec![
            and(vec![
                cmp("i", Op::Gt, &i5),
                cmp("f", Op::Lt, &0.5f64.to_le_bytes()),
            ]),
            cmp("n", Op::Eq, &[]),
        ])
    );
    assert!(err("i > 1 & f < 2", &s).contains("parenthesize"));
    // Ints into floats, strings as bytes, attr()/dim()/val().
    assert_eq!(
        parse("f >= 2", &s).unwrap(),
        cmp("f", Op::Ge, &2.0f64.to_le_bytes())
    );
    assert_eq!(
        parse("attr(\"s\") == \"a\\x41é\"", &s).unwrap(),
        cmp("s", Op::Eq, "aAé".as_bytes())
    );
    assert_eq!(
        parse("dim('d') < val(-0x10)", &s).unwrap(),
        cmp("d", Op::Lt, &(-16i32).to_le_bytes())
    );
    assert_eq!(
        parse("s in ['ab', \"\", 'c']", &s).unwrap(),
        Condition::Membership {
            field: "s".into(),
            op: Op::In,
            data: b"abc".to_vec(),
            offsets: vec![0, 2, 2],
        }
    );
    assert_eq!(
        parse("i not in [1, -2]", &s).unwrap(),
        Condition::Membership {
            field: "i".into(),
            op: Op::NotIn,
            data: [1i32.to_le_bytes(), (-2i32).to_le_bytes()].concat(),
            offsets: vec![0, 4],
        }
    );
    // Null tests are EQ/NE with no value; `== ''` must not read as one.
    assert!(parse("n != None", &s).unwrap().is_null_test());
    let empty = parse("s == ''", &s).unwrap();
    assert!(!empty.is_null_test());
    assert_eq!(
        empty,
        Condition::Membership {
            field: "s".into(),
            op: Op::In,
            data: vec![],
            offsets: vec![0],
        }
    );
}

#[test]
fn not_is_rewritten_as_tiledb_negates() {
    let (s, _) = load("query_conditions_sparse");
    // De Morgan, ops negated, no NOT node left.
    assert_eq!(
        parse("not (i < 0 or s == 'x')", &s).unwrap(),
        and(vec![
            cmp("i", Op::Ge, &0i32.to_le_bytes()),
            cmp("s", Op::Ne, b"x"),
        ])
    );
    assert_eq!(
        parse("not not i in [1]", &s).unwrap(),
        parse("i in [1]", &s).unwrap()
    );
    assert_eq!(parse("not n == None", &s).unwrap(), cmp("n", Op::Ne, &[]));
    // A serialized NOT node is pushed down when bound.
    let tree = Condition::Combination {
        op: Comb::Not,
        children: vec![cmp("n", Op::Lt, &3i64.to_le_bytes())],
    };
    let b = BoundCondition::new(&tree, &s, &HashMap::new()).unwrap();
    let cols = batch_n(&[Some(1), None, Some(7)]);
    assert_eq!(run(&b, &cols), [false, false, true]);
}

fn batch_n(values: &[Option<i64>]) -> Batch {
    let mut n = FieldBuffer::new("n", Datatype::Int64, 1, true);
    for v in values {
        n.data.extend(v.unwrap_or(i64::MIN).to_le_bytes());
        n.validity.as_mut().unwrap().push(v.is_some());
    }
    let mut b = Batch {
        num_cells: values.len() as u64,
        ..Default::default()
    };
    b.fields.push(n);
    b
}

fn run(b: &BoundCondition, cols: &dyn Columns) -> Vec<bool> {
    let mut mask = vec![true; cols.cell_num()];
    b.evaluate(cols, &mut mask).unwrap();
    mask
}

fn eval_str(
    expr: &str,
    schema: &ArraySchema,
    enums: &HashMap<String, Enumeration>,
    cols: &Batch,
) -> Vec<bool> {
    let tree = parse_with_enumerations(expr, schema, enums).unwrap();
    let b = BoundCondition::new(&tree, schema, enums).unwrap();
    run(&b, cols)
}

#[test]
fn null_cells_fail_every_value_test() {
    let (s, e) = load("query_conditions_sparse");
    let cols = batch_n(&[Some(1), None, Some(7)]);
    let t = |x: &str| eval_str(x, &s, &e, &cols);
    assert_eq!(t("n == None"), [false, true, false]);
    assert_eq!(t("n != None"), [true, false, true]);
    assert_eq!(t("n != 1"), [false, false, true]);
    assert_eq!(t("not (n == 1)"), [false, false, true]);
    assert_eq!(t("n not in [1]"), [false, false, true]);
    assert_eq!(t("n < 5 or n == None"), [true, true, false]);
    // A null test on a non-nullable field: ALWAYS_FALSE / ALWAYS_TRUE.
    let mut cols2 = batch_n(&[Some(1)]);
    let mut i = FieldBuffer::new("i", Datatype::Int32, 1, false);
    i.data.extend(3i32.to_le_bytes());
    cols2.fields.push(i);
    assert_eq!(eval_str("i == None", &s, &e, &cols2), [false]);
    assert_eq!(eval_str("i != None", &s, &e, &cols2), [true]);
}

#[test]
fn floats_strings_and_chars_compare_as_tiledb_does() {
    let (s, e) = load("query_conditions_sparse");
    let mut b = Batch {
        num_cells: 4,
        ..Default::default()
    };
    let mut f = FieldBuffer::new("f", Datatype::Float64, 1, false);
    for v in [f64::NAN, -0.0, 0.5, f64::INFINITY] {
        f.data.extend(v.to_le_bytes());
    }
    let mut st = FieldBuffer::new("s", Datatype::StringUtf8, VAR_NUM, false);
    for v in ["", "ab", "abc", "\u{e9}"] {
        st.offsets.as_mut().unwrap().push(st.data.len() as u64);
        st.data.extend(v.as_bytes());
    }
    let mut c = FieldBuffer::new("c", Datatype::Char, 1, false);
    c.data.extend([b'a', 0xff, b'z', 0]);
    b.fields = vec![f, st, c];
    let t = |x: &str| eval_str(x, &s, &e, &b);
    assert_eq!(t("f != 0.0"), [true, false, true, true]); // NaN != x; -0.0 == 0.0
    assert_eq!(t("f >= 0"), [false, true, true, true]);
    assert_eq!(t("f in [0.0]"), [false, false, false, false]); // bytes: -0.0 is not 0.0
    assert_eq!(t("s < 'abc'"), [true, true, false, false]); // prefix first, UTF-8 bytes
    assert_eq!(t("s == ''"), [true, false, false, false]);
    assert_eq!(t("s != ''"), [false, true, true, true]);
    assert_eq!(t("s >= 'b'"), [false, false, false, true]);
    // CHAR is TileDB's signed `char`: 0xff is -1.
    assert_eq!(t("c < 'a'"), [false, true, false, true]);
    assert_eq!(t("c == ''"), [false, false, false, true]);
}

#[test]
fn fixed_char_cells_compare_their_first_byte() {
    // TileDB 2.30 evaluates fixed CHAR cells as one `char` (query_condition.cc
    // dispatches CHAR without var size to `char`), whatever cell_val_num.
    let (s, e) = load("attr_ascii_fixed_char");
    let mut b = Batch {
        num_cells: 3,
        ..Default::default()
    };
    let mut c = FieldBuffer::new("c3", Datatype::Char, 3, false);
    c.data.extend(b"abcaxyzzz");
    b.fields.push(c);
    assert_eq!(eval_str("c3 == 'abc'", &s, &e, &b), [true, true, false]);
    // Membership compares whole cells.
    assert_eq!(eval_str("c3 in ['abc']", &s, &e, &b), [true, false, false]);
    assert!(err("c3 in ['ab']", &s).contains("3 bytes per cell"));
}

/// Tile bounds of strings are in `strncmp`'s order (unsigned, up to a NUL);
/// they rule a tile out only where the condition's order agrees. Found by
/// TileDB's answer to `c > 'Y'` on `attr_char_bytes`: the tile's max,
/// b"\xff", is -1 to a signed `char`, and the tile was skipped.
#[test]
fn string_tile_bounds_rule_out_only_what_they_order() {
    let (s, e) = load("attr_char_bytes");
    let may = |expr: &str, lo: &[u8], hi: &[u8]| {
        let tree = parse_with_enumerations(expr, &s, &e).unwrap();
        let b = BoundCondition::new(&tree, &s, &e).unwrap();
        let (lo, hi) = (lo.to_vec(), hi.to_vec());
        b.may_match(&|_| Some((lo.as_slice(), hi.as_slice())))
    };
    assert!(may("c > 'Y'", b"\0", b"\xff"), "0xff is below 'Y' signed");
    assert!(!may("c > 'Y'", b"A", b"X"), "bounds below 0x80 order alike");
    assert!(may("c > 'Y'", b"A", b"z"));
    assert!(!may("v > 'b'", b"", b"abc"));
    assert!(
        may("v > 'b'", b"", b"a\0z"),
        "bytes past a NUL are unordered"
    );
}

#[test]
fn enumerated_attributes_compare_label_indexes() {
    let (s, e) = load("enumeration");
    let mut b = Batch {
        num_cells: 5,
        ..Default::default()
    };
    let mut color = FieldBuffer::new("color", Datatype::Int8, 1, false);
    color.data.extend([0u8, 1, 2, 3, 1]); // red green blue "" green
    let mut size = FieldBuffer::new("size", Datatype::UInt8, 1, false);
    size.data.extend([0u8, 1, 2, 0, 2]); // 10 20 30 10 30
    b.fields = vec![color, size];
    let t = |x: &str| eval_str(x, &s, &e, &b);
    assert_eq!(t("color == 'green'"), [false, true, false, false, true]);
    assert_eq!(t("color == ''"), [false, false, false, true, false]);
    assert_eq!(
        t("color in ['red', 'purple', 'blue']"),
        [true, false, true, false, false]
    );
    // A label the enumeration lacks.
    assert_eq!(t("color == 'purple'"), [false; 5]);
    assert_eq!(t("color != 'purple'"), [true; 5]);
    assert_eq!(t("color not in ['purple']"), [true; 5]);
    // Numeric labels, in the enumeration's datatype; ordered: inequalities.
    assert_eq!(t("size >= 20"), [false, true, true, false, true]);
    assert_eq!(t("size == 25"), [false; 5]);
    // Unordered enumerations refuse inequalities.
    let tree = parse("color < 'red'", &s).unwrap();
    let msg = BoundCondition::new(&tree, &s, &e).unwrap_err().to_string();
    assert!(msg.contains("not ordered"), "{msg}");
    // Binding needs the enumeration.
    let msg = BoundCondition::new(&tree, &s, &HashMap::new())
        .unwrap_err()
        .to_string();
    assert!(msg.contains("not loaded"), "{msg}");
    // The tree keeps the label; numbers need the enumeration's datatype.
    assert_eq!(
        parse("color == 'red'", &s).unwrap(),
        cmp("color", Op::Eq, b"red")
    );
    assert_eq!(
        parse_with_enumerations("size == 20", &s, &e).unwrap(),
        cmp("size", Op::Eq, &20i32.to_le_bytes())
    );
    assert!(err("size == 20", &s).contains("parse_with_enumerations"));
}

#[test]
fn literals_are_range_and_type_checked() {
    let (s, _) = load("attr_int_types");
    assert!(err("int8 > 128", &s).contains("[-128, 127]"));
    assert!(err("uint8 == -1", &s).contains("[0, 255]"));
    assert!(err("uint64 < 18446744073709551616", &s).contains("outside"));
    assert_eq!(
        parse("uint64 == 18446744073709551615", &s).unwrap(),
        cmp("uint64", Op::Eq, &u64::MAX.to_le_bytes())
    );
    assert_eq!(
        parse("int16 == 3.0", &s).unwrap(),
        cmp("int16", Op::Eq, &3i16.to_le_bytes())
    );
    assert!(err("int16 == 3.5", &s).contains("whole number"));
    assert!(err("int32 == '5'", &s).contains("unquote"));
    assert_eq!(
        parse("uint8 == True", &s).unwrap(),
        cmp("uint8", Op::Eq, &[1])
    );
    let (q, _) = load("query_conditions_sparse");
    assert!(err("s == 5", &q).contains("compare it with a string"));
    assert!(err("nope > 1", &q).contains("no field named `nope`"));
    assert!(err("attr('d') > 1", &q).contains("no attribute named `d`"));
    assert!(err("dim('i') > 1", &q).contains("no dimension named `i`"));
    assert!(err("i > j", &q).contains("quote"));
    assert!(err("i < None", &q).contains("`==` or `!=`"));
    assert!(err("i in []", &q).contains("at least one"));
    assert!(err("i in 5", &q).contains("list"));
    assert!(err("i is None", &q).contains("`is`"));
    assert!(err("i = 5", &q).contains("`==`"));
    assert!(err("i > 5 and", &q).contains("ends"));
    assert!(err("(i > 5", &q).contains("expected `)`"));
    assert!(err("i", &q).contains("comparisons"));
    assert!(err("", &q).contains("empty"));
    assert!(err("s == 'abc", &q).contains("unterminated"));
    assert!(err("f == f", &q).contains("constants"));
    let (dt, _) = load("sparse_datetime_dim");
    assert_eq!(
        parse("t >= 19000", &dt).unwrap(),
        cmp("t", Op::Ge, &19000i64.to_le_bytes())
    );
    let (blob, _) = load("attr_blob");
    assert!(err("b == 'x'", &blob).contains("BLOB"));
    assert!(parse("nb == None", &blob).is_ok());
    let (var, _) = load("attr_var_numeric");
    assert!(err("vi == 1", &var).contains("per cell"));
    assert!(parse("vi != None", &var).is_ok());
    let (cvn, _) = load("attr_fixed_cvn");
    assert!(err("i2 == 1", &cvn).contains("2 INT32 values per cell"));
}

#[test]
fn hostile_expressions_are_errors_not_panics() {
    let (s, _) = load("query_conditions_sparse");
    let deep = format!("{}i > 1{}", "(".repeat(10_000), ")".repeat(10_000));
    assert!(parse(&deep, &s).is_err());
    let nots = format!("{}i > 1", "not ".repeat(10_000));
    assert!(parse(&nots, &s).is_err());
    let signs = format!("i > {}1", "-".repeat(10_000));
    assert!(parse(&signs, &s).is_err());
    // A condition compared with a field, on either side (found by the
    // `condition` fuzz target: the left-hand field hid the condition).
    for chained in ["i == (i > 1)", "(i > 1) == i", "(True == i > 0) > z"] {
        assert!(err(chained, &s).contains("itself a condition"), "{chained}");
    }
    for bad in [
        "'\\x", "\"\\u12", "b'é'", "0x", "1e", "1.2.3", "3abc", "[", "]", ",", "i > > 1", "()",
    ] {
        let _ = parse(bad, &s);
    }
    // Every prefix of a long expression.
    let long = "not (i in [1, 2] or s == 'x\\'y') and attr(\"f\") <= -1.5e3 | (n != None)";
    for n in 0..long.len() {
        if long.is_char_boundary(n) {
            let _ = parse(&long[..n], &s);
        }
    }
}

#[test]
fn evaluate_checks_column_shapes() {
    let (s, e) = load("query_conditions_sparse");
    let tree = parse("i > 1", &s).unwrap();
    let b = BoundCondition::new(&tree, &s, &e).unwrap();
    assert_eq!(b.fields(), ["i"]);
    let mut cols = Batch {
        num_cells: 2,
        ..Default::default()
    };
    let mut i = FieldBuffer::new("i", Datatype::Int64, 1, false);
    i.data.extend([0u8; 16]);
    cols.fields.push(i);
    let mut mask = vec![true; 2];
    assert!(b.evaluate(&cols, &mut mask).is_err());
    // Too few cells.
    cols.fields[0] = FieldBuffer::new("i", Datatype::Int32, 1, false);
    cols.fields[0].data.extend(5i32.to_le_bytes());
    assert!(b.evaluate(&cols, &mut mask).is_err());
    // A field the cells lack matches nothing (TileDB's sparse reader).
    cols.fields.clear();
    b.evaluate(&cols, &mut mask).unwrap();
    assert_eq!(mask, [false, false]);
}

/// Cells of a fragment written before `c` was added (only `a` in the
/// columns), as TileDB 2.30 answered the same conditions on such cells in
/// `schema_evolution_conditions` (a = 1, 2, 3, 4): a test on the missing
/// field is false, and inside an OR it clears the alternatives before it.
#[test]
fn a_field_the_cells_lack_fails_and_clears_the_or_before_it() {
    let (s, e) = load("schema_evolution_conditions");
    let mut cols = Batch {
        num_cells: 4,
        ..Default::default()
    };
    let mut a = FieldBuffer::new("a", Datatype::Int32, 1, false);
    a.data
        .extend([1i32, 2, 3, 4].iter().flat_map(|v| v.to_le_bytes()));
    cols.fields.push(a);
    let kept = |cond: &str| {
        let b = BoundCondition::new(&parse(cond, &s).unwrap(), &s, &e).unwrap();
        let mut mask = vec![true; 4];
        b.evaluate(&cols, &mut mask).unwrap();
        mask
    };
    let none = [false; 4];
    assert_eq!(kept("c != 100"), none);
    assert_eq!(kept("not (c == 5)"), none);
    assert_eq!(kept("c in [5, 7]"), none);
    assert_eq!(kept("a == 1 and c != 100"), none);
    assert_eq!(kept("a == 1 or c == 5"), none);
    assert_eq!(kept("c == 5 or a == 1"), [true, false, false, false]);
    assert_eq!(
        kept("a == 1 or c == 5 or a == 3"),
        [false, false, true, false]
    );
    assert_eq!(
        kept("c == 5 or a == 1 or a == 3"),
        [true, false, true, false]
    );
    assert_eq!(kept("(a == 1 and a == 1) or c == 5"), none);
    assert_eq!(
        kept("c == 5 or (a == 2 and a == 2)"),
        [false, true, false, false]
    );
    assert_eq!(kept("a < 4 and (a == 3 or c == 5)"), none);
    assert_eq!(kept("a == 1 or a == 3"), [true, false, true, false]);
}

#[test]
fn built_conditions_parse_into_the_trees_of_their_text() {
    // query_conditions_sparse: i INT32, f FLOAT64, s STRING_UTF8, n INT64
    // nullable, c CHAR.
    let (schema, enums) = load("query_conditions_sparse");
    let same = |built: Cond, text: &str| {
        let a = parse_with_enumerations(built.text(), &schema, &enums).unwrap();
        let b = parse_with_enumerations(text, &schema, &enums).unwrap();
        assert_eq!(a, b, "{} vs {text}", built.text());
    };
    same(
        field("i")
            .gt(5)
            .and(field("s").eq("x").or(field("n").is_null())),
        "i > 5 and (s == 'x' or n == None)",
    );
    same(field("f").le(2.5).not(), "not (f <= 2.5)");
    same(field("i").is_in([1, 2, 3]), "i in [1, 2, 3]");
    same(field("s").not_in(["a", "b"]), "s not in ['a', 'b']");
    same(
        field("n").is_not_null().and(field("i").ne(-3)),
        "n != None and i != -3",
    );
    // Quotes and backslashes in strings survive.
    same(field("s").eq("it's a \\ test"), r#"s == "it's a \\ test""#);
    // A float literal stays a float on an integer attribute's refusal.
    assert!(parse(field("i").gt(1.5).text(), &schema).is_err());
    assert!(parse(field("nope").gt(1).text(), &schema).is_err());
}
