//! AG2's `ContextExpression`: a condition over a group's context variables,
//! checked without a model (`OnContextCondition`, and the `available`
//! condition of any handoff). The syntax is AG2's: `${name}` reads a
//! variable, `len(${name})` its length; literals are numbers, quoted
//! strings, `True`/`False`/`None` (or `true`/`false`/`null`); operators are
//! `not`/`!`, `and`/`&`, `or`/`|`, `==`, `!=`, `<`, `<=`, `>`, `>=`, with
//! parentheses. A variable that is not set reads as `None`; truth is
//! Python's (`None`, `false`, `0`, `""`, `[]` and `{}` are false).

use std::cmp::Ordering;

use serde_json::{Map, Value};

/// The deepest nesting of parentheses and `not`s an expression may have.
const MAX_DEPTH: usize = 32;

/// A parsed expression, as written in the agent file.
#[derive(Debug, Clone)]
pub struct Expr {
    node: Node,
    source: String,
}

#[derive(Debug, Clone)]
enum Node {
    Var(String),
    Len(String),
    Lit(Value),
    Not(Box<Node>),
    And(Box<Node>, Box<Node>),
    Or(Box<Node>, Box<Node>),
    Cmp(Box<Node>, Op, Box<Node>),
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Var(String),
    Len,
    Lit(Value),
    Not,
    And,
    Or,
    Op(Op),
    Open,
    Close,
}

impl Expr {
    /// Parses `source`.
    ///
    /// # Errors
    /// What is wrong, and where.
    pub fn parse(source: &str) -> Result<Self, String> {
        let tokens = lex(source)?;
        let mut parser = Parser { tokens, at: 0 };
        let node = parser.or(0)?;
        if parser.at != parser.tokens.len() {
            return Err(format!("unexpected {:?}", parser.tokens[parser.at]));
        }
        Ok(Self {
            node,
            source: source.to_owned(),
        })
    }

    /// Whether the expression holds for `context`.
    pub fn holds(&self, context: &Map<String, Value>) -> bool {
        truthy(&eval(&self.node, context))
    }

    /// The expression as written.
    pub fn source(&self) -> &str {
        &self.source
    }
}

fn lex(source: &str) -> Result<Vec<Token>, String> {
    let mut tokens = Vec::new();
    let mut rest = source.trim_start();
    while let Some(c) = rest.chars().next() {
        let (token, used) = if let Some(after) = rest.strip_prefix("${") {
            let end = after
                .find('}')
                .ok_or("`${` without its closing `}`".to_owned())?;
            let name = &after[..end];
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(format!("`${{{name}}}` is not a variable name"));
            }
            (Token::Var(name.to_owned()), end + 3)
        } else if c == '\'' || c == '"' {
            let end = rest[1..]
                .find(c)
                .ok_or("a string without its closing quote".to_owned())?;
            (Token::Lit(Value::String(rest[1..=end].to_owned())), end + 2)
        } else if c.is_ascii_digit()
            || (c == '-' && rest[1..].starts_with(|d: char| d.is_ascii_digit()))
        {
            let len = 1 + rest[1..]
                .find(|d: char| !(d.is_ascii_digit() || d == '.'))
                .unwrap_or(rest.len() - 1);
            let number: f64 = rest[..len]
                .parse()
                .map_err(|_| format!("`{}` is not a number", &rest[..len]))?;
            let value = serde_json::Number::from_f64(number)
                .ok_or(format!("`{}` is not a number", &rest[..len]))?;
            (Token::Lit(Value::Number(value)), len)
        } else if c.is_ascii_alphabetic() {
            let len = rest
                .find(|d: char| !(d.is_ascii_alphanumeric() || d == '_'))
                .unwrap_or(rest.len());
            let token = match &rest[..len] {
                "not" => Token::Not,
                "and" => Token::And,
                "or" => Token::Or,
                "len" => Token::Len,
                "True" | "true" => Token::Lit(Value::Bool(true)),
                "False" | "false" => Token::Lit(Value::Bool(false)),
                "None" | "null" => Token::Lit(Value::Null),
                word => return Err(format!("`{word}`: a variable is written `${{{word}}}`")),
            };
            (token, len)
        } else {
            let two = rest.get(..2).unwrap_or("");
            match two {
                "==" => (Token::Op(Op::Eq), 2),
                "!=" => (Token::Op(Op::Ne), 2),
                "<=" => (Token::Op(Op::Le), 2),
                ">=" => (Token::Op(Op::Ge), 2),
                _ => match c {
                    '<' => (Token::Op(Op::Lt), 1),
                    '>' => (Token::Op(Op::Gt), 1),
                    '!' => (Token::Not, 1),
                    '&' => (Token::And, 1),
                    '|' => (Token::Or, 1),
                    '(' => (Token::Open, 1),
                    ')' => (Token::Close, 1),
                    other => return Err(format!("unexpected `{other}`")),
                },
            }
        };
        tokens.push(token);
        rest = rest[used..].trim_start();
    }
    if tokens.is_empty() {
        return Err("an empty expression".into());
    }
    Ok(tokens)
}

struct Parser {
    tokens: Vec<Token>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn next(&mut self) -> Result<Token, String> {
        let token = self.peek().cloned().ok_or("the expression ends too soon")?;
        self.at += 1;
        Ok(token)
    }

    fn or(&mut self, depth: usize) -> Result<Node, String> {
        let mut node = self.and(depth)?;
        while self.peek() == Some(&Token::Or) {
            self.at += 1;
            node = Node::Or(Box::new(node), Box::new(self.and(depth)?));
        }
        Ok(node)
    }

    fn and(&mut self, depth: usize) -> Result<Node, String> {
        let mut node = self.not(depth)?;
        while self.peek() == Some(&Token::And) {
            self.at += 1;
            node = Node::And(Box::new(node), Box::new(self.not(depth)?));
        }
        Ok(node)
    }

    fn not(&mut self, depth: usize) -> Result<Node, String> {
        if depth > MAX_DEPTH {
            return Err(format!("nested deeper than {MAX_DEPTH}"));
        }
        if self.peek() == Some(&Token::Not) {
            self.at += 1;
            return Ok(Node::Not(Box::new(self.not(depth + 1)?)));
        }
        let left = self.atom(depth)?;
        if let Some(Token::Op(op)) = self.peek().cloned() {
            self.at += 1;
            let right = self.atom(depth)?;
            return Ok(Node::Cmp(Box::new(left), op, Box::new(right)));
        }
        Ok(left)
    }

    fn atom(&mut self, depth: usize) -> Result<Node, String> {
        match self.next()? {
            Token::Var(name) => Ok(Node::Var(name)),
            Token::Lit(value) => Ok(Node::Lit(value)),
            Token::Len => match (self.next()?, self.next()?, self.next()?) {
                (Token::Open, Token::Var(name), Token::Close) => Ok(Node::Len(name)),
                _ => Err("`len` takes one variable: `len(${name})`".into()),
            },
            Token::Open => {
                let node = self.or(depth + 1)?;
                match self.next()? {
                    Token::Close => Ok(node),
                    other => Err(format!("expected `)`, found {other:?}")),
                }
            }
            other => Err(format!("unexpected {other:?}")),
        }
    }
}

fn eval(node: &Node, context: &Map<String, Value>) -> Value {
    match node {
        Node::Var(name) => context.get(name).cloned().unwrap_or(Value::Null),
        Node::Len(name) => Value::from(match context.get(name) {
            Some(Value::String(s)) => s.chars().count(),
            Some(Value::Array(a)) => a.len(),
            Some(Value::Object(o)) => o.len(),
            _ => 0,
        }),
        Node::Lit(value) => value.clone(),
        Node::Not(inner) => Value::Bool(!truthy(&eval(inner, context))),
        Node::And(a, b) => Value::Bool(truthy(&eval(a, context)) && truthy(&eval(b, context))),
        Node::Or(a, b) => Value::Bool(truthy(&eval(a, context)) || truthy(&eval(b, context))),
        Node::Cmp(a, op, b) => {
            let (a, b) = (eval(a, context), eval(b, context));
            let order = compare(&a, &b);
            Value::Bool(match op {
                Op::Eq => order == Some(Ordering::Equal),
                Op::Ne => order != Some(Ordering::Equal),
                Op::Lt => order == Some(Ordering::Less),
                Op::Le => matches!(order, Some(Ordering::Less | Ordering::Equal)),
                Op::Gt => order == Some(Ordering::Greater),
                Op::Ge => matches!(order, Some(Ordering::Greater | Ordering::Equal)),
            })
        }
    }
}

/// How `a` compares with `b`: numbers (and booleans, as Python's 0 and 1)
/// by value, strings by code point; anything else only equal or not.
fn compare(a: &Value, b: &Value) -> Option<Ordering> {
    let number = |v: &Value| match v {
        Value::Number(n) => n.as_f64(),
        Value::Bool(b) => Some(f64::from(u8::from(*b))),
        _ => None,
    };
    match (a, b) {
        (Value::String(a), Value::String(b)) => Some(a.cmp(b)),
        _ => match (number(a), number(b)) {
            (Some(a), Some(b)) => a.partial_cmp(&b),
            _ => (a == b).then_some(Ordering::Equal),
        },
    }
}

/// Python's truth of a value.
pub fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn holds(expr: &str, context: Value) -> bool {
        let Value::Object(context) = context else {
            panic!("an object")
        };
        Expr::parse(expr).expect("parses").holds(&context)
    }

    #[test]
    fn the_examples_of_ag2s_documentation_hold_as_there() {
        let c = json!({"logged_in": false, "is_admin": true, "guest_checkout": false,
                       "orders": [1], "user_active": true, "cart_items": [], "checkout_started": false});
        assert!(holds(
            "not ${logged_in} and ${is_admin} or ${guest_checkout}",
            c.clone()
        ));
        assert!(holds(
            "!${logged_in} & ${is_admin} | ${guest_checkout}",
            c.clone()
        ));
        assert!(holds("len(${orders}) > 0 & ${user_active}", c.clone()));
        assert!(holds(
            "len(${cart_items}) == 0 | ${checkout_started}",
            c.clone()
        ));
        assert!(!holds(
            "${logged_in} or (${guest_checkout} and ${is_admin})",
            c
        ));
    }

    #[test]
    fn comparisons_read_numbers_strings_and_missing_variables_as_python_does() {
        let c = json!({"attempts": 3, "tier": "gold", "ratio": 0.5, "done": true});
        assert!(holds("${attempts} >= 3", c.clone()));
        assert!(!holds("${attempts} > 3", c.clone()));
        assert!(holds("${attempts} == 3.0", c.clone()));
        assert!(holds("${tier} == 'gold' and ${ratio} < 1", c.clone()));
        assert!(holds("${tier} != \"silver\"", c.clone()));
        assert!(holds("${missing} == None", c.clone()));
        assert!(!holds("${missing}", c.clone()));
        assert!(holds("${done} == True", c.clone()));
        assert!(holds("${ratio} > -1", c.clone()));
        // Incomparable values are unequal and unordered.
        assert!(!holds("${tier} > 1", c.clone()));
        assert!(holds("${tier} != 1", c));
    }

    #[test]
    fn what_is_not_an_expression_is_refused_with_where() {
        for bad in [
            "",
            "${a",
            "${a b}",
            "attempts > 1",
            "len(${a}",
            "(${a}",
            "${a} ==",
            "'open",
            "${a} ${b}",
            "${a} + 1",
            "__import__('os')",
        ] {
            assert!(Expr::parse(bad).is_err(), "{bad:?} parsed");
        }
        let deep = format!("{}${{a}}{}", "(".repeat(40), ")".repeat(40));
        assert!(Expr::parse(&deep).is_err());
        let nots = format!("{}${{a}}", "not ".repeat(40));
        assert!(Expr::parse(&nots).is_err());
    }
}
