//! TileDB-Py's QueryCondition syntax (a Python expression) into the condition
//! tree TileDB serializes.
//!
//! Grammar (Python's precedence, as `ast.parse` sees it):
//!
//! ```text
//! or      := and ('or' and)*
//! and     := not ('and' not)*
//! not     := 'not' not | compare
//! compare := bitor (cmp_op bitor)*          chained: 1 < a < 5
//! bitor   := bitand ('|' bitand)*
//! bitand  := unary ('&' unary)*
//! unary   := ('-' | '+') unary | atom
//! atom    := '(' or ')' | '[' list ']' | name | attr("n") | dim("n") | val(c) | literal
//! ```
//!
//! As in TileDB-Py, `|`/`&` bind tighter than comparisons, so
//! `(a > 1) & (b < 2)` needs its parentheses; `not` negates its operand by
//! rewriting it (TileDB's `QueryCondition::negate`), so the tree never
//! holds a NOT node.

use super::{negate, QResult};
use crate::QueryError;
use std::collections::HashMap;
use tdb_format::{Datatype, QueryConditionCombinationOp as Comb, QueryConditionOp as Op};
use tdb_fragment::Condition;
use tdb_schema::{ArraySchema, Enumeration, VAR_NUM};

/// Nesting deeper than this is refused (no stack overflow on hostile input).
const MAX_DEPTH: usize = 200;

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Name(String),
    Int(i128),
    Float(f64),
    Str(Vec<u8>),
    Op(&'static str),
}

/// The characters of an expression and a position among them.
struct Cursor<'a> {
    chars: &'a [char],
    at: usize,
}

impl Cursor<'_> {
    /// The character `ahead` places on.
    fn peek(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.at.checked_add(ahead)?).copied()
    }

    /// Moves `n` characters on (at most to the end).
    fn bump(&mut self, n: usize) {
        self.at = self.at.saturating_add(n).min(self.chars.len());
    }

    /// Moves on while `keep` holds.
    fn bump_while(&mut self, keep: impl Fn(char) -> bool) {
        while self.peek(0).is_some_and(&keep) {
            self.bump(1);
        }
    }

    /// The characters from `from` to here.
    fn since(&self, from: usize) -> &[char] {
        self.chars.get(from..self.at).unwrap_or_default()
    }
}

fn tokenize(expr: &str) -> QResult<Vec<Tok>> {
    let err = |reason: String| QueryError::condition(expr, reason);
    let chars: Vec<char> = expr.chars().collect();
    let mut cur = Cursor {
        chars: &chars,
        at: 0,
    };
    let mut out = Vec::new();
    while let Some(c) = cur.peek(0) {
        if c.is_whitespace() {
            cur.bump(1);
            continue;
        }
        // Bytes literals b'..' / b"..".
        let bytes_prefix = (c == 'b' || c == 'B') && matches!(cur.peek(1), Some('\'' | '"'));
        if c == '\'' || c == '"' || bytes_prefix {
            if bytes_prefix {
                cur.bump(1);
            }
            out.push(Tok::Str(
                string_literal(&mut cur, bytes_prefix).map_err(err)?,
            ));
            continue;
        }
        if c.is_ascii_digit() || (c == '.' && cur.peek(1).is_some_and(|d| d.is_ascii_digit())) {
            out.push(number(&mut cur).map_err(err)?);
            continue;
        }
        if c.is_alphabetic() || c == '_' {
            let start = cur.at;
            cur.bump_while(|c| c.is_alphanumeric() || c == '_');
            out.push(Tok::Name(cur.since(start).iter().collect()));
            continue;
        }
        let two: String = [cur.peek(0), cur.peek(1)].into_iter().flatten().collect();
        let op = ["<=", ">=", "==", "!="]
            .into_iter()
            .find(|o| *o == two)
            .or_else(|| {
                ["<", ">", "(", ")", "[", "]", ",", "&", "|", "-", "+"]
                    .into_iter()
                    .find(|o| o.starts_with(c))
            });
        match op {
            Some(o) => {
                cur.bump(o.chars().count());
                out.push(Tok::Op(o));
            }
            None => {
                let hint = match c {
                    '=' => ": use `==` to compare",
                    '^' | '~' => ": only `&` and `|` combine conditions",
                    _ => "",
                };
                return Err(err(format!("unexpected character `{c}`{hint}")));
            }
        }
    }
    Ok(out)
}

/// The string literal at the cursor (on its opening quote), the cursor
/// left past its closing one.
fn string_literal(cur: &mut Cursor<'_>, bytes: bool) -> Result<Vec<u8>, String> {
    let quote = cur.peek(0);
    cur.bump(1);
    let mut out = Vec::new();
    let push = |out: &mut Vec<u8>, c: char| {
        let mut buf = [0u8; 4];
        out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
    };
    while let Some(c) = cur.peek(0) {
        if Some(c) == quote {
            cur.bump(1);
            return Ok(out);
        }
        if c != '\\' {
            if bytes && !c.is_ascii() {
                return Err("bytes literals may hold only ASCII characters".into());
            }
            push(&mut out, c);
            cur.bump(1);
            continue;
        }
        let Some(e) = cur.peek(1) else { break };
        cur.bump(2);
        let mut hex = |n: usize| -> Result<u32, String> {
            let s: String = (0..n)
                .map(|k| cur.peek(k).ok_or("truncated escape"))
                .collect::<Result<_, _>>()?;
            cur.bump(n);
            u32::from_str_radix(&s, 16).map_err(|_| format!("bad escape `\\{e}{s}`"))
        };
        match e {
            '\\' | '\'' | '"' => push(&mut out, e),
            'n' => out.push(b'\n'),
            't' => out.push(b'\t'),
            'r' => out.push(b'\r'),
            '0' => out.push(0),
            'x' => {
                let v = hex(2)?;
                if bytes {
                    // Two hex digits: at most 0xff.
                    out.push(u8::try_from(v).unwrap_or(u8::MAX));
                } else {
                    push(&mut out, char::from_u32(v).ok_or("bad \\x escape")?);
                }
            }
            'u' | 'U' if !bytes => {
                let v = hex(if e == 'u' { 4 } else { 8 })?;
                push(&mut out, char::from_u32(v).ok_or("bad unicode escape")?);
            }
            other => {
                out.push(b'\\');
                push(&mut out, other);
            }
        }
    }
    Err("unterminated string literal".into())
}

/// The number at the cursor, the cursor left past it.
fn number(cur: &mut Cursor<'_>) -> Result<Tok, String> {
    let start = cur.at;
    let radix = match (cur.peek(0), cur.peek(1).map(|c| c.to_ascii_lowercase())) {
        (Some('0'), Some('x')) => 16,
        (Some('0'), Some('o')) => 8,
        (Some('0'), Some('b')) => 2,
        _ => 10,
    };
    if radix != 10 {
        cur.bump(2);
        let s = cur.at;
        cur.bump_while(|c| c.is_digit(radix) || c == '_');
        let digits: String = cur.since(s).iter().filter(|c| **c != '_').collect();
        let v = i128::from_str_radix(&digits, radix).map_err(|_| "bad integer literal")?;
        return Ok(Tok::Int(v));
    }
    let mut float = false;
    while let Some(c) = cur.peek(0) {
        let digit = |ahead: usize| cur.peek(ahead).is_some_and(|d| d.is_ascii_digit());
        if c.is_ascii_digit() || c == '_' {
            cur.bump(1);
        } else if c == '.' && !float {
            float = true;
            cur.bump(1);
        } else if (c == 'e' || c == 'E')
            && (digit(1) || (matches!(cur.peek(1), Some('+' | '-')) && digit(2)))
        {
            float = true;
            cur.bump(2);
        } else {
            break;
        }
    }
    if let Some(c) = cur.peek(0).filter(|c| c.is_alphanumeric()) {
        return Err(format!(
            "bad number `{}{c}`",
            cur.since(start).iter().collect::<String>()
        ));
    }
    let text: String = cur.since(start).iter().filter(|c| **c != '_').collect();
    if float {
        let v: f64 = text.parse().map_err(|_| format!("bad number `{text}`"))?;
        Ok(Tok::Float(v))
    } else {
        let v: i128 = text
            .parse()
            .map_err(|_| format!("integer `{text}` is too large"))?;
        Ok(Tok::Int(v))
    }
}

/// A constant of the expression.
#[derive(Debug, Clone, PartialEq)]
enum Lit {
    Int(i128),
    Float(f64),
    Str(Vec<u8>),
    Bool(bool),
    None,
}

impl Lit {
    fn show(&self) -> String {
        match self {
            Lit::Int(v) => v.to_string(),
            Lit::Float(v) => format!("{v:?}"),
            Lit::Str(s) => format!("'{}'", String::from_utf8_lossy(s)),
            Lit::Bool(true) => "True".into(),
            Lit::Bool(false) => "False".into(),
            Lit::None => "None".into(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum VarKind {
    Any,
    Attr,
    Dim,
}

/// What a sub-expression evaluates to.
#[derive(Debug, Clone)]
enum Node {
    Cond(Condition),
    Var(String, VarKind),
    Value(Lit),
    List(Vec<Node>),
}

struct Parser<'a> {
    expr: &'a str,
    toks: Vec<Tok>,
    pos: usize,
    depth: usize,
    schema: &'a ArraySchema,
    enumerations: &'a HashMap<String, Enumeration>,
}

pub(super) fn parse(
    expr: &str,
    schema: &ArraySchema,
    enumerations: &HashMap<String, Enumeration>,
) -> QResult<Condition> {
    let toks = tokenize(expr)?;
    if toks.is_empty() {
        return Err(QueryError::condition(expr, "the condition is empty"));
    }
    let mut p = Parser {
        expr,
        toks,
        pos: 0,
        depth: 0,
        schema,
        enumerations,
    };
    let node = p.or()?;
    if let Some(t) = p.toks.get(p.pos) {
        return Err(p.err(format!("unexpected {} after a complete condition", show(t))));
    }
    match node {
        Node::Cond(c) => Ok(c),
        _ => {
            Err(p
                .err("a query condition must be made of comparisons such as `a > 5` or `s == 'x'`"))
        }
    }
}

fn show(t: &Tok) -> String {
    match t {
        Tok::Name(n) => format!("`{n}`"),
        Tok::Int(v) => format!("`{v}`"),
        Tok::Float(v) => format!("`{v}`"),
        Tok::Str(s) => format!("'{}'", String::from_utf8_lossy(s)),
        Tok::Op(o) => format!("`{o}`"),
    }
}

impl Parser<'_> {
    fn err(&self, reason: impl Into<String>) -> QueryError {
        QueryError::condition(self.expr, reason)
    }

    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos)
    }

    fn eat_op(&mut self, op: &str) -> bool {
        if matches!(self.peek(), Some(Tok::Op(o)) if *o == op) {
            self.pos = self.pos.saturating_add(1);
            true
        } else {
            false
        }
    }

    fn eat_kw(&mut self, kw: &str) -> bool {
        if matches!(self.peek(), Some(Tok::Name(n)) if n == kw) {
            self.pos = self.pos.saturating_add(1);
            true
        } else {
            false
        }
    }

    fn expect_op(&mut self, op: &str) -> QResult<()> {
        if self.eat_op(op) {
            return Ok(());
        }
        Err(match self.peek() {
            Some(t) => self.err(format!("expected `{op}`, found {}", show(t))),
            None => self.err(format!("expected `{op}` at the end")),
        })
    }

    fn enter(&mut self) -> QResult<()> {
        self.depth = self.depth.saturating_add(1);
        if self.depth > MAX_DEPTH {
            return Err(self.err(format!("nested deeper than {MAX_DEPTH} levels")));
        }
        Ok(())
    }

    fn cond(&self, n: Node, what: &str) -> QResult<Condition> {
        if matches!(what, "&" | "|") && !matches!(n, Node::Cond(_)) {
            return Err(self.err(format!(
                "`{what}` binds tighter than comparisons: parenthesize its operands, \
                 e.g. `(a > 1) {what} (b < 2)`"
            )));
        }
        match n {
            Node::Cond(c) => Ok(c),
            Node::Var(v, _) => Err(self.err(format!(
                "`{what}` needs conditions on both sides, not the field `{v}` alone: compare it, e.g. `{v} > 0`"
            ))),
            Node::Value(l) => Err(self.err(format!(
                "`{what}` needs conditions on both sides, not the value {}",
                l.show()
            ))),
            Node::List(_) => Err(self.err(format!(
                "`{what}` needs conditions on both sides, not a list"
            ))),
        }
    }

    fn combine(&self, op: Comb, lhs: Node, rhs: Node, what: &str) -> QResult<Node> {
        let (l, r) = (self.cond(lhs, what)?, self.cond(rhs, what)?);
        Ok(Node::Cond(combine(op, l, r)))
    }

    fn or(&mut self) -> QResult<Node> {
        self.enter()?;
        let mut n = self.and()?;
        while self.eat_kw("or") {
            let r = self.and()?;
            n = self.combine(Comb::Or, n, r, "or")?;
        }
        self.depth = self.depth.saturating_sub(1);
        Ok(n)
    }

    fn and(&mut self) -> QResult<Node> {
        let mut n = self.not()?;
        while self.eat_kw("and") {
            let r = self.not()?;
            n = self.combine(Comb::And, n, r, "and")?;
        }
        Ok(n)
    }

    fn not(&mut self) -> QResult<Node> {
        if self.eat_kw("not") {
            self.enter()?;
            let n = self.not()?;
            self.depth = self.depth.saturating_sub(1);
            let c = self.cond(n, "not")?;
            return negate(c).map(Node::Cond).map_err(|r| self.err(r));
        }
        self.compare()
    }

    fn cmp_op(&mut self) -> Option<CmpOp> {
        let op = match self.peek()? {
            Tok::Op("<") => CmpOp::Op(Op::Lt),
            Tok::Op("<=") => CmpOp::Op(Op::Le),
            Tok::Op(">") => CmpOp::Op(Op::Gt),
            Tok::Op(">=") => CmpOp::Op(Op::Ge),
            Tok::Op("==") => CmpOp::Op(Op::Eq),
            Tok::Op("!=") => CmpOp::Op(Op::Ne),
            Tok::Name(n) if n == "in" => CmpOp::In,
            Tok::Name(n) if n == "is" => CmpOp::Is,
            Tok::Name(n)
                if n == "not"
                    && matches!(self.toks.get(self.pos.saturating_add(1)), Some(Tok::Name(m)) if m == "in") =>
            {
                self.pos = self.pos.saturating_add(1);
                CmpOp::NotIn
            }
            _ => return None,
        };
        self.pos = self.pos.saturating_add(1);
        Some(op)
    }

    fn compare(&mut self) -> QResult<Node> {
        let first = self.bitor()?;
        let mut operands = vec![first];
        let mut ops = Vec::new();
        while let Some(op) = self.cmp_op() {
            ops.push(op);
            operands.push(self.bitor()?);
        }
        let Some(&first_op) = ops.first() else {
            return Ok(operands.pop().expect("one operand"));
        };
        match first_op {
            CmpOp::Is => Err(self.err("the `is` operator is not supported: use `== None`")),
            CmpOp::In | CmpOp::NotIn => {
                if ops.len() > 1 {
                    return Err(self.err("a membership test cannot be chained"));
                }
                let op = if first_op == CmpOp::In {
                    Op::In
                } else {
                    Op::NotIn
                };
                let rhs = operands.pop().expect("two operands");
                let lhs = operands.pop().expect("two operands");
                self.membership(lhs, op, rhs).map(Node::Cond)
            }
            CmpOp::Op(_) => {
                // TileDB-Py: `1 < a < 5` is `1 < a and a < 5`.
                let mut result: Option<Condition> = None;
                for (op, pair) in ops.iter().zip(operands.windows(2)) {
                    let CmpOp::Op(op) = *op else {
                        return Err(self.err("`in` cannot be chained with comparisons"));
                    };
                    let [lhs, rhs] = pair else {
                        return Err(self.err("a comparison needs two operands"));
                    };
                    let c = self.comparison(lhs.clone(), op, rhs.clone())?;
                    result = Some(match result {
                        None => c,
                        Some(r) => combine(Comb::And, r, c),
                    });
                }
                Ok(Node::Cond(result.expect("one comparison")))
            }
        }
    }

    fn bitor(&mut self) -> QResult<Node> {
        let mut n = self.bitand()?;
        while self.eat_op("|") {
            let r = self.bitand()?;
            n = self.combine(Comb::Or, n, r, "|")?;
        }
        Ok(n)
    }

    fn bitand(&mut self) -> QResult<Node> {
        let mut n = self.unary()?;
        while self.eat_op("&") {
            let r = self.unary()?;
            n = self.combine(Comb::And, n, r, "&")?;
        }
        Ok(n)
    }

    fn unary(&mut self) -> QResult<Node> {
        let sign = if self.eat_op("-") {
            -1
        } else if self.eat_op("+") {
            1
        } else {
            return self.atom();
        };
        self.enter()?;
        let n = self.unary()?;
        self.depth = self.depth.saturating_sub(1);
        // Literals are at most i128::MAX: a sign never overflows.
        let int = |v: i128| Node::Value(Lit::Int(v.saturating_mul(sign)));
        match n {
            Node::Value(Lit::Int(v)) => Ok(int(v)),
            Node::Value(Lit::Float(v)) => Ok(Node::Value(Lit::Float(v * sign as f64))),
            Node::Value(Lit::Bool(b)) => Ok(int(i128::from(b))),
            _ => Err(self.err("a sign can only precede a number")),
        }
    }

    fn atom(&mut self) -> QResult<Node> {
        let Some(t) = self.peek().cloned() else {
            return Err(self.err("the condition ends where a value or field was expected"));
        };
        self.pos = self.pos.saturating_add(1);
        match t {
            Tok::Int(v) => Ok(Node::Value(Lit::Int(v))),
            Tok::Float(v) => Ok(Node::Value(Lit::Float(v))),
            Tok::Str(s) => Ok(Node::Value(Lit::Str(s))),
            Tok::Op("(") => {
                let n = self.or()?;
                self.expect_op(")")?;
                Ok(n)
            }
            Tok::Op("[") => {
                let mut items = Vec::new();
                if !self.eat_op("]") {
                    loop {
                        items.push(self.unary()?);
                        if self.eat_op("]") {
                            break;
                        }
                        self.expect_op(",")?;
                        if self.eat_op("]") {
                            break;
                        }
                    }
                }
                Ok(Node::List(items))
            }
            Tok::Name(n) => match n.as_str() {
                "True" => Ok(Node::Value(Lit::Bool(true))),
                "False" => Ok(Node::Value(Lit::Bool(false))),
                "None" => Ok(Node::Value(Lit::None)),
                "and" | "or" | "not" | "in" | "is" => {
                    Err(self.err(format!("`{n}` where a field or value was expected")))
                }
                "attr" | "dim" | "val" if self.eat_op("(") => {
                    let arg = self.unary()?;
                    self.expect_op(")").map_err(|_| {
                        self.err(format!("exactly one argument must be given to {n}()"))
                    })?;
                    match (n.as_str(), arg) {
                        ("val", Node::Value(l)) => Ok(Node::Value(l)),
                        ("attr", Node::Value(Lit::Str(s))) => {
                            Ok(Node::Var(self.utf8(s)?, VarKind::Attr))
                        }
                        ("dim", Node::Value(Lit::Str(s))) => {
                            Ok(Node::Var(self.utf8(s)?, VarKind::Dim))
                        }
                        _ => Err(self.err(format!(
                            "{n}() takes one constant: attr(\"name\"), dim(\"name\"), val(5)"
                        ))),
                    }
                }
                _ => {
                    if matches!(self.peek(), Some(Tok::Op("("))) {
                        return Err(self.err(format!(
                            "`{n}(...)`: valid casts are attr(), dim() and val()"
                        )));
                    }
                    Ok(Node::Var(n, VarKind::Any))
                }
            },
            Tok::Op(o) => Err(self.err(format!("unexpected `{o}`"))),
        }
    }

    fn utf8(&self, s: Vec<u8>) -> QResult<String> {
        String::from_utf8(s).map_err(|_| self.err("a field name must be UTF-8"))
    }

    /// Resolves a field and checks `attr()`/`dim()`.
    fn field(&self, name: &str, kind: VarKind) -> QResult<Field<'_>> {
        let attr = self.schema.attribute(name);
        let dim = self
            .schema
            .domain
            .dimensions
            .iter()
            .find(|d| d.name == name);
        let f = match (attr, dim, kind) {
            (Some(a), _, VarKind::Any | VarKind::Attr) => Field {
                name: name.to_owned(),
                datatype: a.datatype,
                cell_val_num: a.cell_val_num,
                nullable: a.nullable,
                enumeration: a.enumeration.as_deref(),
            },
            (_, Some(d), VarKind::Any | VarKind::Dim) => Field {
                name: name.to_owned(),
                datatype: d.datatype,
                cell_val_num: d.cell_val_num,
                nullable: false,
                enumeration: None,
            },
            _ => {
                let what = match kind {
                    VarKind::Attr => "attribute",
                    VarKind::Dim => "dimension",
                    VarKind::Any => "field",
                };
                return Err(self.err(format!(
                    "no {what} named `{name}` in the array (fields: {})",
                    self.schema.field_names()
                )));
            }
        };
        Ok(f)
    }

    /// `lhs op rhs`, the field on either side (TileDB-Py's `order_nodes`).
    fn comparison(&self, lhs: Node, op: Op, rhs: Node) -> QResult<Condition> {
        // A condition on either side is refused first: `a == (b > 1)` has
        // a field on the left and must not reach the value below.
        let (var, value, op) = match (lhs, rhs) {
            (Node::Cond(_), _) | (_, Node::Cond(_)) => {
                return Err(self.err(
                    "a comparison's operand is itself a condition: `&` and `|` bind tighter \
                     than comparisons, so parenthesize, e.g. `(a > 1) & (b < 2)`",
                ))
            }
            (Node::Var(v, k), value) => ((v, k), value, op),
            (value, Node::Var(v, k)) => ((v, k), value, flip(op)),
            _ => return Err(self.err("a comparison needs a field on one side")),
        };
        let lit = match value {
            Node::Value(l) => l,
            Node::Var(other, _) => {
                return Err(self.err(format!(
                    "`{}` compared with `{other}`: right-hand sides must be constants \
                     (did you mean to quote '{other}' as a string?)",
                    var.0
                )))
            }
            Node::List(_) => {
                return Err(self.err(format!("a list can only follow `in`: `{} in [...]`", var.0)))
            }
            Node::Cond(_) => unreachable!("handled above"),
        };
        let f = self.field(&var.0, var.1)?;
        if lit == Lit::None {
            if !matches!(op, Op::Eq | Op::Ne) {
                return Err(self.err(format!(
                    "`{}`: None can only be compared with `==` or `!=`",
                    f.name
                )));
            }
            // TileDB's null test: EQ/NE with no value.
            return Ok(Condition::Compare {
                field: f.name,
                op,
                value: Vec::new(),
            });
        }
        let mut value = self.encode(&f, &lit)?;
        if value.is_empty() && f.datatype == Datatype::Char && f.cell_val_num != VAR_NUM {
            // Fixed CHAR cells compare as one `char` with TileDB's empty
            // string, which reads as its terminating NUL.
            value.push(0);
        }
        if value.is_empty() && matches!(op, Op::Eq | Op::Ne) {
            // `s == ''` is not a null test: an empty EQ/NE value would read
            // as one, so the same test is written as a membership of one
            // empty member (equivalent for every cell, null cells included).
            let op = if op == Op::Eq { Op::In } else { Op::NotIn };
            return Ok(Condition::Membership {
                field: f.name,
                op,
                data: Vec::new(),
                offsets: vec![0],
            });
        }
        Ok(Condition::Compare {
            field: f.name,
            op,
            value,
        })
    }

    fn membership(&self, lhs: Node, op: Op, rhs: Node) -> QResult<Condition> {
        let (name, kind) = match lhs {
            Node::Var(v, k) => (v, k),
            _ => {
                return Err(self
                    .err("`in` syntax is `field in ['l', 'i', 's', 't']`, the field on the left"))
            }
        };
        let Node::List(items) = rhs else {
            return Err(self.err(format!(
                "`in` syntax is `{name} in [...]`: the right-hand side must be a list"
            )));
        };
        if items.is_empty() {
            return Err(self.err(format!("`{name} in []`: give at least one value")));
        }
        let f = self.field(&name, kind)?;
        let mut data = Vec::new();
        let mut offsets = Vec::with_capacity(items.len());
        for item in items {
            let Node::Value(lit) = item else {
                return Err(self.err(format!("`{name} in [...]`: members must be constants")));
            };
            if lit == Lit::None {
                return Err(self.err(format!(
                    "`{name} in [...]`: None cannot be a member; test `{name} == None` instead"
                )));
            }
            let v = self.encode(&f, &lit)?;
            let fixed = f.cell_val_num != VAR_NUM && f.enumeration.is_none();
            if fixed && (v.len() as u64) != f.datatype.cell_size(f.cell_val_num) {
                return Err(self.err(format!(
                    "`{name}` holds {} bytes per cell: member {} has {} bytes",
                    f.datatype.cell_size(f.cell_val_num),
                    lit.show(),
                    v.len()
                )));
            }
            offsets.push(data.len() as u64);
            data.extend_from_slice(&v);
        }
        Ok(Condition::Membership {
            field: f.name,
            op,
            data,
            offsets,
        })
    }

    /// A literal's bytes in the field's datatype (an enumerated attribute's
    /// literal in its enumeration's datatype, as TileDB-Py builds it).
    fn encode(&self, f: &Field<'_>, lit: &Lit) -> QResult<Vec<u8>> {
        let (datatype, cvn, what) = match f.enumeration {
            Some(e) => match self.enumerations.get(e) {
                Some(en) => (
                    en.datatype,
                    en.cell_val_num,
                    format!("enumeration `{e}` of `{}`", f.name),
                ),
                // Without the enumeration its datatype is unknown: labels
                // are strings in every enumeration TileDB-Py writes.
                None => match lit {
                    Lit::Str(s) => return Ok(s.clone()),
                    _ => {
                        return Err(self.err(format!(
                            "`{}` is enumerated by `{e}`: its enumeration must be loaded to \
                             compare it with {} (parse_with_enumerations)",
                            f.name,
                            lit.show()
                        )))
                    }
                },
            },
            None => {
                check_field(f).map_err(|r| self.err(r))?;
                (f.datatype, f.cell_val_num, format!("`{}`", f.name))
            }
        };
        encode(datatype, cvn, lit)
            .map_err(|r| self.err(format!("{what} is {}{r}", datatype.name())))
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum CmpOp {
    Op(Op),
    In,
    NotIn,
    Is,
}

struct Field<'a> {
    name: String,
    datatype: Datatype,
    cell_val_num: u32,
    nullable: bool,
    enumeration: Option<&'a str>,
}

/// TileDB's `check_node_validity` for value tests.
fn check_field(f: &Field<'_>) -> Result<(), String> {
    let _ = f.nullable;
    if !supported(f.datatype) {
        return Err(format!(
            "`{}` is {}: conditions compare numbers, dates and strings only (a null test \
             `== None` works on any field)",
            f.name,
            f.datatype.name()
        ));
    }
    if !f.datatype.is_string() && f.cell_val_num != 1 {
        return Err(format!(
            "`{}` holds {} {} values per cell: TileDB compares only single-value numeric cells",
            f.name,
            if f.cell_val_num == VAR_NUM {
                "a variable number of".to_owned()
            } else {
                f.cell_val_num.to_string()
            },
            f.datatype.name()
        ));
    }
    Ok(())
}

/// Datatypes TileDB's condition can compare values of.
pub(super) fn supported(d: Datatype) -> bool {
    !matches!(
        d,
        Datatype::Any
            | Datatype::StringUtf16
            | Datatype::StringUtf32
            | Datatype::StringUcs2
            | Datatype::StringUcs4
            | Datatype::Blob
            | Datatype::GeomWkb
            | Datatype::GeomWkt
    )
}

fn flip(op: Op) -> Op {
    match op {
        Op::Lt => Op::Gt,
        Op::Le => Op::Ge,
        Op::Gt => Op::Lt,
        Op::Ge => Op::Le,
        other => other,
    }
}

/// TileDB's `combine`: children of the same op are flattened into one node.
fn combine(op: Comb, l: Condition, r: Condition) -> Condition {
    let mut children = Vec::new();
    for c in [l, r] {
        match c {
            Condition::Combination {
                op: o,
                children: cs,
            } if o == op => children.extend(cs),
            other => children.push(other),
        }
    }
    Condition::Combination { op, children }
}

/// `lit`'s bytes as one value of `datatype`; errors complete the sentence
/// "`field` is DATATYPE...".
fn encode(datatype: Datatype, cvn: u32, lit: &Lit) -> Result<Vec<u8>, String> {
    use tdb_format::DatatypeClass as C;
    let int = |v: i128| -> Result<Vec<u8>, String> { int_bytes(datatype, v) };
    match (datatype.class(), lit) {
        (C::String, Lit::Str(s)) => {
            let _ = cvn;
            Ok(s.clone())
        }
        (C::String, other) => Err(format!(
            ": compare it with a string, e.g. '{}'",
            match other {
                Lit::Str(_) | Lit::None => String::new(),
                Lit::Int(v) => v.to_string(),
                Lit::Float(v) => v.to_string(),
                Lit::Bool(b) => if *b { "True" } else { "False" }.to_owned(),
            }
        )),
        (_, Lit::Str(s)) => Err(format!(
            ": cannot compare it with the string '{}' (unquote numbers)",
            String::from_utf8_lossy(s)
        )),
        (C::Float, Lit::Int(v)) => Ok(float_bytes(datatype, *v as f64)),
        (C::Float, Lit::Float(v)) => Ok(float_bytes(datatype, *v)),
        (C::Float, Lit::Bool(b)) => Ok(float_bytes(datatype, f64::from(u8::from(*b)))),
        (_, Lit::Int(v)) => int(*v),
        (_, Lit::Bool(b)) => int(i128::from(*b)),
        (_, Lit::Float(v)) => {
            if v.is_finite() && v.fract() == 0.0 && v.abs() < 1e38 {
                int(*v as i128)
            } else {
                Err(format!(
                    ": {v:?} is not a whole number; compare with an integer"
                ))
            }
        }
        (_, Lit::None) => Err(": None is only for `== None` / `!= None`".into()),
    }
}

fn float_bytes(d: Datatype, v: f64) -> Vec<u8> {
    if d == Datatype::Float32 {
        (v as f32).to_le_bytes().to_vec()
    } else {
        v.to_le_bytes().to_vec()
    }
}

/// `v` as `d` (an integer, BOOL, DATETIME_* or TIME_* type), range-checked.
pub(super) fn int_bytes(d: Datatype, v: i128) -> Result<Vec<u8>, String> {
    // BOOL holds what a `uint8_t` does.
    let limits = if d == Datatype::Bool {
        Datatype::UInt8.int_limits()
    } else {
        d.int_limits()
    };
    let Some((lo, hi)) = limits else {
        return Err(format!(": integers do not fit {}", d.name()));
    };
    if v < lo || v > hi {
        return Err(format!(": {v} is outside its range [{lo}, {hi}]"));
    }
    // In range: the low bytes are the value's two's complement.
    Ok(v.to_le_bytes()
        .get(..d.size() as usize)
        .unwrap_or_default()
        .to_vec())
}
