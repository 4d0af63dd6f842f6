"""The data benchmark's Python side: the same queries on the same Parquet file with DuckDB and
with pandas (pyarrow engine), cold (file read) and median of 5.  usage: python_stack.py FILE"""
import statistics
import sys
import time

import duckdb
import pandas as pd

path = sys.argv[1]
QUERIES = [
    ("count delayed > 60 min", "SELECT count(*) AS n FROM flights WHERE delay > 60",
     lambda df: int((df["delay"] > 60).sum())),
    ("top 10 origins by flights, mean delay",
     "SELECT origin, count(*) AS n, avg(delay) AS mean_delay FROM flights GROUP BY origin ORDER BY n DESC LIMIT 10",
     lambda df: df.groupby("origin")["delay"].agg(["count", "mean"]).sort_values("count", ascending=False).head(10)),
    ("mean delay and distance by destination",
     "SELECT destination, avg(delay) AS d, avg(distance) AS km FROM flights GROUP BY destination ORDER BY d DESC",
     lambda df: df.groupby("destination")[["delay", "distance"]].mean().sort_values("delay", ascending=False)),
]

def timed(f):
    t = time.perf_counter()
    f()
    return (time.perf_counter() - t) * 1000

con = duckdb.connect()
con.execute("SET threads TO 2")
for name, sql, _ in QUERIES:
    q = sql.replace("FROM flights", f"FROM read_parquet('{path}')")
    cold = timed(lambda: con.execute(q).fetchall())
    med = statistics.median(timed(lambda: con.execute(q).fetchall()) for _ in range(5))
    print(f"DuckDB               | {name}: cold {cold:.0f} ms, median {med:.0f} ms")
for name, _, f in QUERIES:
    # pandas must load the file before any query: the cold time includes the read.
    cold = timed(lambda: f(pd.read_parquet(path, engine="pyarrow")))
    df = pd.read_parquet(path, engine="pyarrow")
    med = statistics.median(timed(lambda: f(df)) for _ in range(5))
    print(f"pandas (in memory)   | {name}: cold {cold:.0f} ms (read + query), median {med:.0f} ms (query only)")
