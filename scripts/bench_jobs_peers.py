#!/usr/bin/env python3
"""Ray, Dask and Spark measured on this machine, as peers for `mote bench jobs`.

mote's data-parallel jobs follow Canary (the paper in shared/papers, sections 2 and 5): partitions
stay resident where they were computed, and each stage runs one short task per partition. Two
things decide how such a system performs, and this script measures both for the usual Python
peers, on the same machine and data that `mote bench jobs` uses, so that the numbers can sit in
one table:

1. Task rate (the counterpart of the paper's Figure 4, which runs Spark's low-level task API):
   P partitions of 100 floats each live in the system's memory (P = 10 partitions per core by
   default), and every stage runs one task per partition that sums its partition, which takes
   microseconds, so what is measured is the cost of scheduling, dispatching and completing a
   task. Stages run one after the other (each waits for its P results, as an iteration of a job
   does) until about T tasks have run, or for --max-seconds if a system is slower than that.
   Warm-up stages come first, so JVM, cluster and worker start-up are excluded. Each system uses
   its natural, fastest way to launch fine-grained tasks on resident data:
     ray:   remote tasks on `ray.put` partitions ("tasks"), or one actor per partition holding it
            ("actors"); the better is reported, both are listed.
     dask:  client.map on scattered partitions, distributed scheduler, LocalCluster with 2 worker
            processes x 1 thread ("distributed"), or the in-process threaded scheduler on a raw
            task graph ("threaded"); the better is reported, both are listed.
     spark: local[2], a cached RDD of P partitions, `mapPartitions(...).count()` per stage
            (one job = one stage = P tasks), with the task in Python ("mapPartitions.count"), or
            the same on a cached Scala RDD of longs, counted in the JVM ("jvm:range.count"),
            which is Spark's own scheduler rate as in the paper, without PySpark's per-task
            round trip to a Python worker; the better is reported, both are listed.
   Keys: <system>_tasks_per_s, <system>_method, <system>_methods {method: {tasks, seconds,
   tasks_per_s}}.

2. One logistic-regression iteration (batch gradient descent, the paper's "Spark (low level API)"
   row of Table 1): the points of --points FILE (text, one point a line, comma-separated, the 0/1
   label first, then the features) are split into P partitions cached in memory as numpy arrays;
   each iteration every partition computes its gradient sum((sigmoid(X.w) - y) * X) and the
   driver sums them and updates w <- w - step * grad / n with step 1.0, starting from w = 0.
   One warm-up iteration, then K timed ones; the MEDIAN is reported, as the paper does for Spark
   (it filters out JIT and GC). The gradient does not depend on how points are partitioned, so
   every system must end with the same weights: <system>_lr_w_head (the first 3) checks that.
   Spark reads the file with textFile + mapPartitions into numpy (as the paper's Spark code);
   Ray (`ray.put` per partition, one remote task per partition) and Dask (scattered to the
   workers, client.map) get the partitions from the driver, which parses the file.
   Keys: <system>_lr_iteration_ms, <system>_lr_iterations_ms, <system>_lr_w_head.

3. Word count (--text PATH, instead of 1 and 2; `mote bench jobs --wordcount`): the words
   (str.split: runs of whitespace) of the text objects under PATH (a file, or a directory's
   files) counted, each system its fastest way, all listed:
     ray:   "tasks": a task per object counts it with collections.Counter (in C) and splits the
            counts by word hash into one dict per reducer; P reducer tasks add them up; the
            driver joins their disjoint dicts.
     dask:  "bag.reduction(Counter)": read_text into about P partitions, a Counter a partition
            over its joined lines, the Counters added up in a tree; on the distributed
            LocalCluster.
     spark: "sql.groupBy.count": read.text, split on \\s+, explode, groupBy(word).count(), all in
            the JVM; "rdd.reduceByKey": textFile(..).flatMap(split).map((w, 1)).reduceByKey(add)
            .collect(), the issue's PySpark, which splits and combines in Python workers.
   Not run, as much slower on 16 MiB of `mote bench jobs --wordcount`'s text (2026-11-28, 2 cores):
   Ray Data (read_text, a Counter per block in map_batches, groupby(word).sum(count)): 17.3 s
   against tasks' 2.5 s, and it needs ray[data]'s pyarrow and pandas; Dask's canonical bag word
   count (read_text(..).str.split().flatten().frequencies(), a Python call per word): 39.7 s
   against bag.reduction(Counter)'s 2.1 s.
   Timed from reading the text to the (word, count) pairs in the driver, after an untimed run on
   the first object (workers started, code loaded), median of --reps runs; the interpreter's, the
   JVM's and the cluster's start are not timed. A method slower than twice the fastest one run
   so far stops after that run (it cannot be the fastest; `stopped` says so), so that the slow
   ones do not take the time of many. Each method's result is digested for `mote bench jobs` to
   check against its own count: distinct words, words, and the SHA-256 of the lines
   word<TAB>count<LF> sorted by word.
   Keys: <system>_wordcount_s, <system>_wordcount_method, <system>_wordcount_methods {method:
   {runs_s, seconds, distinct, total, sha256, stopped?}}; text, text_objects, text_bytes,
   wordcount_reps, wordcount_timed.

Also: machine, date, versions, partitions, install_s, points, tasks_target and iterations (not
with --text), <system>_setup_s (cluster or JVM start), <system>_error if a system failed to
install or run (the others are still measured; the exit status is 0 unless every system failed).

Every system runs in its own process, one after the other, so a crash or a leftover daemon of one
cannot disturb another, and each gets both cores. BLAS threads are pinned to 1 in all of them:
each system runs 2 tasks at once on 2 cores, and a multithreaded numpy would oversubscribe.

The peers are pinned (PINS below) and installed from PyPI into a venv, default
target/jobs-peers-venv of the repository, or $MOTE_PEERS_VENV; a venv whose versions already
match is reused. Spark needs Java 17 or newer on PATH. Never run this by CI: it downloads about
500 MB (900 MB installed) and runs for minutes.

A points file can be made with, e.g. (200,000 points of 20 features, separable by a hidden w):
  python3 -c 'import random as r; w=[r.gauss(0,1) for _ in range(20)]; print("\\n".join((lambda x: ",".join(["%d" % (sum(a*b for a,b in zip(w,x))>0)]+["%.6f" % v for v in x]))([r.gauss(0,1) for _ in range(20)]) for _ in range(200000)))' > /tmp/points.csv
"""

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SYSTEMS = ("ray", "dask", "spark")

# Pinned peers. pyspark 4.x runs on Java 17 (checked with OpenJDK 17.0.15); plain `ray` rather
# than `ray[default]` since the dashboard, the only thing [default] adds that matters here, is off.
PINS = {
    "numpy": {"numpy": "2.4.6"},
    "ray": {"ray": "2.60.0"},
    "dask": {"dask": "2026.8.0", "distributed": "2026.8.0"},
    "spark": {"pyspark": "4.3.0"},
}

# Each partition of the task-rate benchmark: 100 floats, summed by every task (a few µs of work).
TASK_PARTITION_LEN = 100
LR_STEP = 1.0


def log(*args):
    print("bench-jobs-peers:", *args, file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------------
# Orchestrator: runs with any python3, installs the venv, runs each system in the venv's python.


def venv_dir():
    return Path(os.environ.get("MOTE_PEERS_VENV") or REPO / "target" / "jobs-peers-venv")


def installed_versions(py):
    """Versions of every pinned distribution present in the venv (missing ones are absent)."""
    names = [n for pins in PINS.values() for n in pins]
    code = (
        "import importlib.metadata as m, json, sys\n"
        "out = {}\n"
        "for n in sys.argv[1:]:\n"
        "    try: out[n] = m.version(n)\n"
        "    except m.PackageNotFoundError: pass\n"
        "print(json.dumps(out))\n"
    )
    r = subprocess.run([str(py), "-c", code, *names], capture_output=True, text=True)
    return json.loads(r.stdout) if r.returncode == 0 else {}


def ensure_venv(systems):
    """Create/refresh the venv; returns (python path, {system: install error})."""
    venv = venv_dir()
    py = venv / "bin" / "python"
    errors = {}
    venv.mkdir(parents=True, exist_ok=True)
    # Two benchmarks sharing a venv must not pip-install into it at the same time.
    with open(venv.parent / (venv.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not py.exists():
            log(f"creating venv {venv}")
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, stdout=sys.stderr)
        have = installed_versions(py)
        # numpy first: every system needs it, and installing it alone keeps one system's failure
        # from hiding the others'.
        for group in ("numpy", *systems):
            want = PINS[group]
            if all(have.get(n) == v for n, v in want.items()):
                continue
            specs = [f"{n}=={v}" for n, v in want.items()]
            if group == "dask":
                specs[0] = f"dask[distributed]=={want['dask']}"
            log("pip install", *specs)
            r = subprocess.run(
                [str(py), "-m", "pip", "install", "--disable-pip-version-check", "-q", *specs,
                 f"numpy=={PINS['numpy']['numpy']}"],  # keeps a dependency from moving numpy
                stdout=sys.stderr, stderr=subprocess.PIPE, text=True,
            )
            if r.returncode != 0:
                sys.stderr.write(r.stderr)
                last = (r.stderr.strip().splitlines() or ["(no output)"])[-1]
                msg = f"pip install {' '.join(specs)} failed: {last}"
                if group == "numpy":
                    errors.update({s: msg for s in systems})
                    break
                errors[group] = msg
        if "spark" in systems and "spark" not in errors and not shutil.which("java"):
            errors["spark"] = "java not found on PATH (Spark needs Java 17+)"
    return py, errors


def java_version():
    try:
        r = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=30)
        m = re.search(r'version "([^"]+)"', r.stderr)
        return m.group(1) if m else r.stderr.strip().splitlines()[0]
    except Exception:
        return None


def machine():
    model = None
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"nproc": len(os.sched_getaffinity(0)), "model": model or platform.processor()}


def count_points(path):
    with open(path, "rb") as f:
        return sum(1 for line in f if line.strip())


def run_system(py, system, args):
    """Runs one system's measurements in its own process; returns its keys (or an error key)."""
    cmd = [str(py), str(Path(__file__).resolve()), "--system", system,
           "--partitions", str(args.partitions), "--iterations", str(args.iterations),
           "--tasks", str(args.tasks), "--max-seconds", str(args.max_seconds)]
    if args.points:
        cmd += ["--points", str(Path(args.points).resolve())]
    if args.text:
        cmd += ["--text", str(Path(args.text).resolve()), "--reps", str(args.reps)]
    env = dict(os.environ)
    # str's hash fixed in every process: Ray's word count sends a word to the reducer of its hash
    # from any worker process.
    env["PYTHONHASHSEED"] = "0"
    # One BLAS thread per task: 2 tasks already run on 2 cores (see the module docstring).
    for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[k] = "1"
    env["PYSPARK_PYTHON"] = env["PYSPARK_DRIVER_PYTHON"] = str(py)
    log(f"{system}: running")
    started = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=args.system_timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, 9)
        p.communicate()
        return {f"{system}_error": f"timed out after {args.system_timeout} s"}
    log(f"{system}: done in {time.monotonic() - started:.1f} s")
    try:
        return json.loads(out.strip().splitlines()[-1])
    except Exception:
        return {f"{system}_error": f"exited with {p.returncode} without a result (see stderr)"}


def orchestrate(args):
    if os.environ.get("CI", "").lower() not in ("", "0", "false"):
        log("refusing to run under CI (it installs ~500 MB from PyPI and runs for minutes)")
        return 2
    systems = [s for s in SYSTEMS if s in args.only]
    t0 = time.monotonic()
    py, install_errors = ensure_venv(systems)
    install_s = time.monotonic() - t0
    have = installed_versions(py)
    result = {
        "machine": machine(),
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "versions": {
            "ray": have.get("ray"), "dask": have.get("dask"),
            "distributed": have.get("distributed"), "pyspark": have.get("pyspark"),
            "java": java_version(), "numpy": have.get("numpy"),
            "python": subprocess.run([str(py), "-c", "import platform; print(platform.python_version())"],
                                     capture_output=True, text=True).stdout.strip() or None,
        },
        "partitions": args.partitions,
        "install_s": round(install_s, 1),
        # Other work on the machine skews every number here: keep the load average to judge by.
        "loadavg_start": os.getloadavg()[0],
    }
    if args.text:
        files = text_files(args.text)
        result.update({
            "text": str(Path(args.text).resolve()), "text_objects": len(files),
            "text_bytes": sum(os.path.getsize(f) for f in files), "wordcount_reps": args.reps,
            "wordcount_timed": "from reading the text to the (word, count) pairs in the driver, "
                               "median of the reps after an untimed run on the first object; not "
                               "the interpreter, the JVM, the cluster's start or the digest",
        })
    else:
        result.update({"points": count_points(args.points) if args.points else None,
                       "tasks_target": args.tasks, "iterations": args.iterations})
    ok = 0
    for s in systems:
        if s in install_errors:
            result[f"{s}_error"] = install_errors[s]
            continue
        r = run_system(py, s, args)
        result.update(r)
        if any(f"{s}_{k}" in r for k in ("tasks_per_s", "lr_iteration_ms", "wordcount_s")):
            ok += 1
    result["loadavg_end"] = os.getloadavg()[0]
    result["total_s"] = round(time.monotonic() - t0, 1)
    print(json.dumps(result), flush=True)
    return 0 if ok else 1


# ------------------------------------------------------------------------------------------------
# Worker side: runs in the venv's python, one system per process. Imports happen here only.


def errtext(e):
    # Some errors (PySparkRuntimeError) have an empty repr; the class name and message say more.
    return f"{type(e).__name__}: {e}".strip()


def busy(part):
    """The task of the task-rate benchmark: a few microseconds of work on a 100-float partition."""
    return sum(part)


def lr_gradient(part, w):
    """Local gradient sum((sigmoid(X.w) - y) * X) of one partition (X: n x d, y: n)."""
    import numpy as np

    X, y = part
    with np.errstate(over="ignore"):  # exp overflow gives sigmoid 0, which is right
        p = 1.0 / (1.0 + np.exp(-(X @ w)))
    return (p - y) @ X


def load_points(path):
    import numpy as np

    data = np.loadtxt(path, delimiter=",", ndmin=2)
    return data[:, 1:].copy(), data[:, 0].copy()


def task_rate(run_stage, partitions, tasks, max_seconds, warmup_seconds=2.0):
    """Runs stages of `partitions` tasks: warm-up first, then until `tasks` or `max_seconds`."""
    t = time.perf_counter()
    n = 0
    while n < 5 or time.perf_counter() - t < warmup_seconds:
        run_stage()
        n += 1
    done = 0
    start = time.perf_counter()
    while done < tasks:
        run_stage()
        done += partitions
        if time.perf_counter() - start >= max_seconds:
            break  # too slow for `tasks` in time: report the rate over a fixed duration
    seconds = time.perf_counter() - start
    return {"tasks": done, "seconds": round(seconds, 3), "tasks_per_s": round(done / seconds, 1)}


def lr_run(iteration, dim, n, iterations):
    """One warm-up then `iterations` timed iterations; iteration(w) returns the summed gradient."""
    import numpy as np

    w = np.zeros(dim)
    times = []
    for i in range(iterations + 1):
        t = time.perf_counter()
        g = iteration(w)
        w = w - LR_STEP * g / n
        if i > 0:  # the first is the warm-up
            times.append((time.perf_counter() - t) * 1000)
    return {
        "lr_iteration_ms": round(statistics.median(times), 2),
        "lr_iterations_ms": [round(x, 2) for x in times],
        "lr_w_head": [float(round(x, 6)) for x in w[:3]],
    }


def best_method(out, system, methods):
    """Fills <system>_tasks_per_s/_method from the fastest of the methods that ran."""
    out[f"{system}_methods"] = methods
    ran = {m: r for m, r in methods.items() if "tasks_per_s" in r}
    if ran:
        best = max(ran, key=lambda m: ran[m]["tasks_per_s"])
        out[f"{system}_tasks_per_s"] = ran[best]["tasks_per_s"]
        out[f"{system}_method"] = best


@contextlib.contextmanager
def ray_session(out):
    """Ray started on this machine's cores (its start timed as ray_setup_s), shut down after."""
    import ray

    t = time.perf_counter()
    # 2 cores, no dashboard, a small object store: the settings a 2-core laptop-sized run wants.
    ray.init(num_cpus=len(os.sched_getaffinity(0)), include_dashboard=False,
             object_store_memory=500 * 1024 * 1024, logging_level="warning", log_to_driver=False)
    out["ray_setup_s"] = round(time.perf_counter() - t, 2)
    try:
        yield ray
    finally:
        ray.shutdown()


def bench_ray(args, out, errors):
    import numpy as np

    P = args.partitions
    with ray_session(out) as ray:
        parts = [[float(i * TASK_PARTITION_LEN + j) for j in range(TASK_PARTITION_LEN)] for i in range(P)]
        methods = {}

        @ray.remote
        def busy_task(part):
            return busy(part)

        try:
            refs = [ray.put(p) for p in parts]
            methods["tasks"] = task_rate(lambda: ray.get([busy_task.remote(r) for r in refs]),
                                         P, args.tasks, args.max_seconds)
        except Exception as e:
            methods["tasks"] = {"error": errtext(e)}

        @ray.remote
        class Partition:
            def __init__(self, part):
                self.part = part

            def busy(self):
                return busy(self.part)

        try:
            actors = [Partition.remote(p) for p in parts]
            ray.get([a.busy.remote() for a in actors])  # wait until every actor process is up
            methods["actors"] = task_rate(lambda: ray.get([a.busy.remote() for a in actors]),
                                          P, args.tasks, args.max_seconds)
            for a in actors:
                ray.kill(a)  # frees P processes before the LR run
        except Exception as e:
            methods["actors"] = {"error": errtext(e)}
        best_method(out, "ray", methods)

        if args.points:
            try:
                X, y = load_points(args.points)
                prefs = [ray.put((xs, ys)) for xs, ys in zip(np.array_split(X, P), np.array_split(y, P))]
                grad = ray.remote(lr_gradient)
                lr = lr_run(lambda w: np.sum(ray.get([grad.remote(r, w) for r in prefs]), axis=0),
                            X.shape[1], len(y), args.iterations)
                out.update({f"ray_{k}": v for k, v in lr.items()})
                out["ray_lr_method"] = "tasks"
            except Exception as e:
                errors.append(f"lr: {errtext(e)}")


def bench_dask(args, out, errors):
    import dask
    import dask.threaded
    import numpy as np

    P = args.partitions
    parts = [[float(i * TASK_PARTITION_LEN + j) for j in range(TASK_PARTITION_LEN)] for i in range(P)]
    methods = {}

    # The threaded scheduler: a raw graph with the partitions in it, run in this process.
    try:
        graph = {f"p-{i}": p for i, p in enumerate(parts)}
        graph.update({f"t-{i}": (busy, f"p-{i}") for i in range(P)})
        keys = [f"t-{i}" for i in range(P)]
        ncpu = len(os.sched_getaffinity(0))
        methods["threaded"] = task_rate(lambda: dask.threaded.get(graph, keys, num_workers=ncpu),
                                        P, args.tasks, args.max_seconds)
    except Exception as e:
        methods["threaded"] = {"error": errtext(e)}

    with dask_client(out) as client:
        try:
            futs = client.scatter(parts)  # spread over the workers, resident there
            # pure=False: every stage gets new keys, so nothing is answered from earlier results.
            methods["distributed"] = task_rate(lambda: client.gather(client.map(busy, futs, pure=False)),
                                               P, args.tasks, args.max_seconds)
            del futs
        except Exception as e:
            methods["distributed"] = {"error": errtext(e)}
        best_method(out, "dask", methods)

        if args.points:
            try:
                X, y = load_points(args.points)
                pf = client.scatter(list(zip(np.array_split(X, P), np.array_split(y, P))))
                lr = lr_run(lambda w: np.sum(client.gather(client.map(lr_gradient, pf, w=w, pure=False)), axis=0),
                            X.shape[1], len(y), args.iterations)
                out.update({f"dask_{k}": v for k, v in lr.items()})
                out["dask_lr_method"] = "distributed"
            except Exception as e:
                errors.append(f"lr: {errtext(e)}")


@contextlib.contextmanager
def dask_client(out):
    """A distributed LocalCluster of one single-threaded worker process per core (its start timed
    as dask_setup_s) and its client, closed after."""
    from dask.distributed import Client, LocalCluster

    t = time.perf_counter()
    cluster = LocalCluster(n_workers=len(os.sched_getaffinity(0)), threads_per_worker=1,
                           processes=True, dashboard_address=None)
    client = Client(cluster)
    out["dask_setup_s"] = round(time.perf_counter() - t, 2)
    try:
        yield client
    finally:
        client.close()
        cluster.close()


def spark_parse_partition(lines):
    """mapPartitions body: a partition's text lines to one (X, y) pair of numpy arrays."""
    import numpy as np

    lines = [l for l in lines if l.strip()]
    if not lines:
        return []
    data = np.loadtxt(lines, delimiter=",", ndmin=2)
    return [(data[:, 1:].copy(), data[:, 0].copy())]


@contextlib.contextmanager
def spark_context(args, out):
    """Spark in local mode on this machine's cores (its start timed as spark_setup_s), stopped
    after."""
    from pyspark import SparkConf, SparkContext

    P = args.partitions
    ncpu = len(os.sched_getaffinity(0))
    conf = (SparkConf().setMaster(f"local[{ncpu}]").setAppName("mote-bench-jobs-peers")
            .set("spark.ui.enabled", "false").set("spark.ui.showConsoleProgress", "false")
            .set("spark.driver.memory", "2g").set("spark.default.parallelism", str(P))
            .set("spark.driver.host", "127.0.0.1").set("spark.driver.bindAddress", "127.0.0.1")
            # Executor <-> Python worker over a Unix socket instead of TCP loopback (Spark 4.1+):
            # measured here, it cuts a 20-task PySpark stage from ~750 ms to ~260 ms.
            .set("spark.python.unix.domain.socket.enabled", "true")
            # Word count's SQL method shuffles into P partitions, as reduceByKey does.
            .set("spark.sql.shuffle.partitions", str(P)))
    t = time.perf_counter()
    sc = SparkContext(conf=conf)
    sc.setLogLevel("WARN")
    out["spark_setup_s"] = round(time.perf_counter() - t, 2)
    try:
        yield sc
    finally:
        sc.stop()


def bench_spark(args, out, errors):
    import numpy as np

    P = args.partitions
    with spark_context(args, out) as sc:
        try:
            rdd = sc.parallelize(range(P * TASK_PARTITION_LEN), P).map(float).cache()
            rdd.count()  # materializes the cache
            methods = {"mapPartitions.count": task_rate(
                lambda: rdd.mapPartitions(lambda it: [busy(it)]).count(), P, args.tasks, args.max_seconds)}
            rdd.unpersist()
        except Exception as e:
            methods = {"mapPartitions.count": {"error": errtext(e)}}
        # The same stage with no Python in the tasks: a cached Scala RDD of P partitions of 100
        # longs, count() per stage, called through py4j (one call per stage). This is Spark's own
        # scheduler rate, the one the paper's Figure 4 reports; PySpark adds a round trip to a
        # Python worker per task on top of it.
        try:
            jrdd = sc._jsc.sc().range(0, P * TASK_PARTITION_LEN, 1, P).cache()
            jrdd.count()
            methods["jvm:range.count"] = task_rate(jrdd.count, P, args.tasks, args.max_seconds)
            jrdd.unpersist(True)
        except Exception as e:
            methods["jvm:range.count"] = {"error": errtext(e)}
        best_method(out, "spark", methods)

        if args.points:
            try:
                text = sc.textFile(Path(args.points).resolve().as_uri(), P)
                if text.getNumPartitions() != P:  # textFile's P is a minimum; make it exact
                    text = text.repartition(P)
                data = text.mapPartitions(spark_parse_partition).cache()
                n = data.map(lambda p: len(p[1])).sum()
                dim = data.first()[0].shape[1]

                def iteration(w):
                    # The paper's low-level API row: mapPartitions over the cached arrays, the driver
                    # sums the P local gradients.
                    return np.sum(data.mapPartitions(lambda it: [lr_gradient(p, w) for p in it]).collect(), axis=0)

                lr = lr_run(iteration, dim, n, args.iterations)
                out.update({f"spark_{k}": v for k, v in lr.items()})
                out["spark_lr_method"] = "mapPartitions.collect"
            except Exception as e:
                errors.append(f"lr: {errtext(e)}")


# ------------------------------------------------------------------------------------------------
# Word count (--text): each system's ways of counting the words of the same text objects.


def text_files(path):
    """The text objects under --text: the file, or a directory's files in name order (those whose
    names start with _ or . left out, as mote's prefixes leave them out)."""
    p = Path(path)
    if p.is_dir():
        return sorted(str(f) for f in p.iterdir() if f.is_file() and not f.name.startswith(("_", ".")))
    return [str(p)]


def digest(pairs):
    """A word count's result as `mote bench jobs` compares it: distinct words, words, and the
    SHA-256 of the lines word<TAB>count<LF> sorted by word (code points, as UTF-8 bytes sort)."""
    pairs = sorted(pairs)
    lines = "".join(f"{w}\t{c}\n" for w, c in pairs)
    return {"distinct": len(pairs), "total": sum(c for _, c in pairs),
            "sha256": hashlib.sha256(lines.encode()).hexdigest()}


def count_text(text):
    """The words of a text (str.split, whitespace) counted, in C: collections.Counter."""
    from collections import Counter

    return Counter(text.split())


def merge_counts(counters):
    """Counts of disjoint or overlapping sets of words, added up."""
    from collections import Counter

    total = Counter()
    for c in counters:
        total.update(c)
    return total


def wordcount(system, methods, files, reps, out):
    """Times each method (files -> (word, count) pairs in the driver) `reps` times after an
    untimed run on the first object (which starts the workers and loads the code paths), keeps
    the last run's digest, and reports the fastest method's median as <system>_wordcount_s. A
    run over twice the fastest method's median so far is its method's last."""
    results = {}
    for name, count in methods.items():
        try:
            count(files[:1])
            fastest = min((r["seconds"] for r in results.values() if "seconds" in r), default=None)
            times, stopped = [], None
            for _ in range(reps):
                t = time.perf_counter()
                pairs = count(files)
                times.append(time.perf_counter() - t)
                if fastest is not None and times[-1] > 2 * fastest and len(times) < reps:
                    stopped = f"after {len(times)} of {reps} runs: over twice the fastest method's {fastest} s"
                    break
            results[name] = {"runs_s": [round(x, 3) for x in times],
                             "seconds": round(statistics.median(times), 3), **digest(pairs)}
            if stopped:
                results[name]["stopped"] = stopped
            log(f"{system}: {name}: {results[name]['seconds']} s")
        except Exception as e:
            results[name] = {"error": errtext(e)}
    out[f"{system}_wordcount_methods"] = results
    ran = {m: r for m, r in results.items() if "seconds" in r}
    if ran:
        best = min(ran, key=lambda m: ran[m]["seconds"])
        out[f"{system}_wordcount_s"] = ran[best]["seconds"]
        out[f"{system}_wordcount_method"] = best


def wordcount_ray(args, out):
    P = args.partitions
    with ray_session(out) as ray:

        @ray.remote
        def count_object(path, partitions):
            # The object's counts split by word hash into one dict per reducer (PYTHONHASHSEED is
            # fixed for every process, so every worker sends a word to the same reducer).
            with open(path) as f:
                counts = count_text(f.read())
            parts = [{} for _ in range(partitions)]
            for w, c in counts.items():
                parts[hash(w) % partitions][w] = c
            return parts

        @ray.remote
        def reduce_counts(*parts):
            return merge_counts(parts)

        # At least two reducers: a task of num_returns=1 returns its list as one object.
        reducers = max(2, P)

        def tasks(files):
            # One task per object counts it (map-side combine); a task per reducer adds up the
            # words of its hash; the driver joins their disjoint dicts.
            maps = [count_object.options(num_returns=reducers).remote(f, reducers) for f in files]
            reduced = ray.get([reduce_counts.remote(*[m[j] for m in maps]) for j in range(reducers)])
            result = {}
            for r in reduced:
                result.update(r)
            return result.items()

        wordcount("ray", {"tasks": tasks}, text_files(args.text), args.reps, out)


def wordcount_dask(args, out):
    import dask.bag as db

    files = text_files(args.text)
    # About P partitions however many objects there are.
    blocksize = max(1 << 20, -(-sum(os.path.getsize(f) for f in files) // args.partitions))

    def counters(files):
        # A Counter a partition over its joined lines (counted in C), the Counters added up in a
        # tree of reductions.
        bag = db.read_text(files, blocksize=blocksize)
        return bag.reduction(lambda lines: count_text(" ".join(lines)), merge_counts,
                             split_every=8).compute().items()

    with dask_client(out):
        wordcount("dask", {"bag.reduction(Counter)": counters}, files, args.reps, out)


def wordcount_spark(args, out):
    from operator import add

    P = args.partitions
    with spark_context(args, out) as sc:
        from pyspark.sql import SparkSession
        from pyspark.sql import functions as F

        spark = SparkSession.builder.getOrCreate()  # on the running context

        def rdd(files):
            # The PySpark: textFile, split in Python workers, reduceByKey (which combines
            # map-side), collect.
            text = sc.textFile(",".join(Path(f).as_uri() for f in files), P)
            return text.flatMap(lambda line: line.split()).map(lambda w: (w, 1)).reduceByKey(add, P).collect()

        def sql(files):
            # The same in Spark SQL, all in the JVM: split on whitespace, explode, groupBy.count.
            words = spark.read.text([Path(f).as_uri() for f in files]).select(
                F.explode(F.split("value", r"\s+")).alias("word")).where(F.col("word") != "")
            return [(r[0], r[1]) for r in words.groupBy("word").count().collect()]

        # SQL first: the faster, so that a slow reduceByKey stops after one run.
        wordcount("spark", {"sql.groupBy.count": sql, "rdd.reduceByKey": rdd},
                  text_files(args.text), args.reps, out)


def worker(args):
    out, errors = {}, []
    try:
        if args.text:
            {"ray": wordcount_ray, "dask": wordcount_dask, "spark": wordcount_spark}[args.system](args, out)
        else:
            {"ray": bench_ray, "dask": bench_dask, "spark": bench_spark}[args.system](args, out, errors)
    except Exception as e:
        errors.append(errtext(e))
    for m, r in out.get(f"{args.system}_methods", {}).items():
        if "error" in r:
            errors.append(f"tasks ({m}): {r['error']}")
    for m, r in out.get(f"{args.system}_wordcount_methods", {}).items():
        if "error" in r:
            errors.append(f"wordcount ({m}): {r['error']}")
    if errors:
        out[f"{args.system}_error"] = "; ".join(errors)
    print(json.dumps(out), flush=True)
    return 0


def main():
    ap = argparse.ArgumentParser(
        prog="scripts/bench-jobs-peers",
        description=__doc__.split("\n\n")[0] + " Prints one JSON object on stdout, logs on stderr. "
        "Run with --help-long for what is measured and why it is comparable.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--points", metavar="FILE",
                    help="logistic-regression points: label,f1,...,fd per line (no LR run if absent)")
    ap.add_argument("--partitions", "-P", type=int, default=20, metavar="P",
                    help="partitions, and so tasks per stage (default 20: 10 per core on 2 cores)")
    ap.add_argument("--iterations", "-K", type=int, default=10, metavar="K",
                    help="timed LR iterations after one warm-up; the median is reported (default 10)")
    ap.add_argument("--tasks", "-T", type=int, default=20000, metavar="T",
                    help="tasks to run per task-rate measurement (default 20000)")
    ap.add_argument("--max-seconds", type=float, default=60.0, metavar="S",
                    help="cap per task-rate measurement; a slower system is measured over S s instead (default 60)")
    ap.add_argument("--text", metavar="PATH",
                    help="word count instead: the text file, or a directory of text objects, to "
                    "count (see --help-long)")
    ap.add_argument("--reps", type=int, default=1, metavar="R",
                    help="with --text: timed runs of each method; the median is reported (default 1)")
    ap.add_argument("--only", default=",".join(SYSTEMS), metavar="LIST",
                    help="comma-separated subset of ray,dask,spark (default all)")
    ap.add_argument("--system-timeout", type=float, default=900.0, metavar="S",
                    help="give up on a system after S s (default 900)")
    ap.add_argument("--help-long", action="store_true", help="print the full description and exit")
    ap.add_argument("--system", choices=SYSTEMS, help=argparse.SUPPRESS)  # internal: worker mode
    args = ap.parse_args()
    if args.help_long:
        print(__doc__)
        return 0
    if args.partitions < 1 or args.iterations < 1 or args.tasks < 1:
        ap.error("--partitions, --iterations and --tasks must be at least 1")
    args.only = [s.strip() for s in args.only.split(",") if s.strip()]
    bad = [s for s in args.only if s not in SYSTEMS]
    if bad or not args.only:
        ap.error(f"--only takes a subset of {','.join(SYSTEMS)}, not {args.only}")
    if args.points and not Path(args.points).is_file():
        ap.error(f"--points {args.points}: no such file")
    if args.text and not Path(args.text).exists():
        ap.error(f"--text {args.text}: no such file or directory")
    if args.reps < 1:
        ap.error("--reps must be at least 1")
    return worker(args) if args.system else orchestrate(args)


if __name__ == "__main__":
    sys.exit(main())
