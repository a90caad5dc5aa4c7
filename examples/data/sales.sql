-- The sample database of examples/agents/data-analyst.yaml (seed 003): a small
-- shop's regions, products, customers and orders. `sales.db` is this file,
-- loaded into SQLite:  python3 -c "import sqlite3; sqlite3.connect('sales.db').executescript(open('sales.sql').read())"
CREATE TABLE regions (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
CREATE TABLE products (id INTEGER PRIMARY KEY, name TEXT NOT NULL, category TEXT NOT NULL, unit_price REAL NOT NULL);
CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, region_id INTEGER NOT NULL REFERENCES regions(id));
CREATE TABLE orders (
    id INTEGER PRIMARY KEY,
    customer_id INTEGER NOT NULL REFERENCES customers(id),
    product_id INTEGER NOT NULL REFERENCES products(id),
    quantity INTEGER NOT NULL,
    ordered_on TEXT NOT NULL
);
INSERT INTO regions (id, name) VALUES (1, 'North'), (2, 'South'), (3, 'East'), (4, 'West');
INSERT INTO products (id, name, category, unit_price) VALUES
    (1, 'Espresso beans 1 kg', 'Coffee', 24.0),
    (2, 'Filter beans 1 kg', 'Coffee', 19.5),
    (3, 'Green tea 250 g', 'Tea', 9.0),
    (4, 'Ceramic mug', 'Gear', 12.0),
    (5, 'Pour-over kettle', 'Gear', 45.0);
INSERT INTO customers (id, name, region_id) VALUES
    (1, 'Ada', 1), (2, 'Grace', 1), (3, 'Linus', 2), (4, 'Barbara', 2),
    (5, 'Ken', 3), (6, 'Margaret', 3), (7, 'Dennis', 4), (8, 'Frances', 4);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 120)
INSERT INTO orders (id, customer_id, product_id, quantity, ordered_on)
SELECT i,
       1 + (i * i + i / 3) % 8,
       1 + (i * 3 + i / 7) % 5,
       1 + (i * i) % 5,
       date('2026-01-01', '+' || ((i * 11) % 300) || ' days')
FROM n;
