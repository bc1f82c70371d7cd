#!/usr/bin/env python3
"""Campaigns under mpirun on this machine, against the replay measurer (no GPU needed).

- The same replay campaign (fixed seed) on one process, on 3 ranks and on 4 ranks records the
  same candidates, verdicts and fitness in the same order.
- Building ranks lost mid-campaign, one killed (SIGKILL) and one hung (SIGSTOP), cost at most
  their builds in flight: the campaign completes its budget with rank 0 building once none is
  left, says both were lost, ends the job (the hung rank too), the trace database passes SQLite's
  integrity check, and running the same command again alone resumes it.
- The only measuring rank killed: its batch in flight stays built, the campaign stops
  (measurer-failed) with the database intact, and the same command run alone measures what was
  left and completes the budget.

Usage: test_mpi_campaign.py PTXEVO_BINARY [unittest args]. Skips (and says why) without mpirun.
"""
import os
import pathlib
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import unittest

REPO = pathlib.Path(__file__).resolve().parents[2]
SPEC = REPO / "kernels" / "rmsnorm" / "rmsnorm_fwd.spec"
PTXEVO = None  # set from argv
SMALL = ["--batch", "4", "--initial", "4", "--islands", "2", "--island-size", "3", "--seed", "7"]
# Open MPI refuses root without these (CI runs as root); --enable-recovery keeps the job alive
# when a rank dies, which is what the campaign's fault handling needs (docs/distributed.md).
MPI_ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_btl_vader_single_copy_mechanism="none")


def mpirun(n):
    return ["mpirun", "--oversubscribe", "--enable-recovery", "-np", str(n)]


def fingerprint(db):
    con = sqlite3.connect(db)
    try:
        return con.execute(
            "SELECT c.id, c.genome_hash, c.state, e.verdict, e.fitness FROM candidates c "
            "LEFT JOIN evaluations e ON e.candidate_id = c.id ORDER BY c.id, e.id").fetchall()
    finally:
        con.close()


def run(cmd, log, timeout=600):
    with open(log, "w") as f:
        p = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=MPI_ENV, timeout=timeout, cwd=REPO)
    return p.returncode, pathlib.Path(log).read_text()


@unittest.skipUnless(shutil.which("mpirun"), "no mpirun on PATH (scripts/setup.sh installs Open MPI)")
class MpiCampaign(unittest.TestCase):
    def setUp(self):
        self.dir = pathlib.Path(tempfile.mkdtemp(prefix="ptxevo_mpi_"))

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def campaign(self, name, ranks, budget, extra=()):
        db = self.dir / name / "campaign.db"
        cmd = ([] if ranks == 1 else mpirun(ranks)) + [PTXEVO, str(SPEC), "--db", str(db), "--budget", str(budget)]
        rc, out = run(cmd + SMALL + list(extra), self.dir / (name + ".log"))
        self.assertEqual(rc, 0, out[-3000:])
        return db, out

    def test_same_result_on_one_three_and_four_ranks(self):
        one, out1 = self.campaign("one", 1, 12)
        self.assertIn("REPLAY", out1)
        self.assertNotIn("MPI:", out1)
        expected = fingerprint(one)
        self.assertGreaterEqual(sum(1 for row in expected if row[3] is not None), 12)
        for ranks in (3, 4):
            db, out = self.campaign("np%d" % ranks, ranks, 12)
            self.assertIn("MPI: %d ranks on 1 host: rank 0 runs the search and owns the trace database; rank 1 "
                          "measures (replay)" % ranks, out)
            self.assertRegex(out, r"MPI: [1-9]\d* builds on the building ranks\n")
            self.assertEqual(fingerprint(db), expected, "%d ranks recorded something else than one process" % ranks)

    def test_building_ranks_killed_and_hung_mid_campaign(self):
        db = self.dir / "kill" / "campaign.db"
        log = self.dir / "kill.log"
        budget = 24
        cmd = mpirun(4) + [PTXEVO, str(SPEC), "--db", str(db), "--budget", str(budget), "--rank-timeout", "10"] + SMALL
        with open(log, "w") as f:
            job = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=MPI_ENV, cwd=REPO)
            hung = None
            try:
                killed, hung = self.wait_for_rank(job.pid, 3), self.wait_for_rank(job.pid, 2)
                self.wait_for_evaluations(db, 4, job)
                os.kill(hung, signal.SIGSTOP)
                os.kill(killed, signal.SIGKILL)
                rc = job.wait(timeout=600)
            finally:
                if job.poll() is None:
                    job.kill()
                if hung is not None:
                    try:
                        os.kill(hung, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
        out = log.read_text()
        self.assertEqual(rc, 0, out[-3000:])
        self.assertRegex(out, r"MPI: rank 3 \([^)]*, build\) is lost: silent for \d+ s")
        self.assertRegex(out, r"MPI: rank 2 \([^)]*, build\) is lost: silent for \d+ s")
        self.assertRegex(out, r"stopped: budget; %d candidate evaluations" % budget)
        self.assertRegex(out, r"MPI: \d+ builds on the building ranks, [1-9]\d* on rank 0 after the last building rank "
                              r"was lost; rank 2 \(build\) was lost; rank 3 \(build\) was lost")
        con = sqlite3.connect(db)
        try:
            self.assertEqual(con.execute("PRAGMA integrity_check").fetchone()[0], "ok")
            measured = con.execute("SELECT COUNT(*) FROM evaluations").fetchone()[0]
        finally:
            con.close()
        self.assertGreaterEqual(measured, budget)
        # Resume alone: the same database, a larger budget.
        rc, again = run([PTXEVO, str(SPEC), "--db", str(db), "--budget", str(budget + 4)] + SMALL, self.dir / "resume.log")
        self.assertEqual(rc, 0, again[-3000:])
        self.assertIn("(resumed)", again)
        self.assertRegex(again, r"stopped: budget; %d candidate evaluations" % (budget + 4))

    def test_the_measuring_rank_killed(self):
        db = self.dir / "measurer" / "campaign.db"
        log = self.dir / "measurer.log"
        budget = 24
        cmd = mpirun(3) + [PTXEVO, str(SPEC), "--db", str(db), "--budget", str(budget), "--rank-timeout", "5"] + SMALL
        with open(log, "w") as f:
            job = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=MPI_ENV, cwd=REPO)
            try:
                victim = self.wait_for_rank(job.pid, 1)
                self.wait_for_evaluations(db, 4, job)
                os.kill(victim, signal.SIGKILL)
                job.wait(timeout=600)
            finally:
                if job.poll() is None:
                    job.kill()
        out = log.read_text()
        self.assertRegex(out, r"MPI: rank 1 \([^)]*, measure\) is lost: silent for \d+ s")
        self.assertIn("stopped: measurer-failed", out)
        self.assertIn("rank 1 (measure) was lost", out)
        con = sqlite3.connect(db)
        try:
            self.assertEqual(con.execute("PRAGMA integrity_check").fetchone()[0], "ok")
            before = con.execute("SELECT COUNT(*) FROM evaluations").fetchone()[0]
        finally:
            con.close()
        self.assertLess(before, budget)
        rc, again = run([PTXEVO, str(SPEC), "--db", str(db), "--budget", str(budget)] + SMALL, self.dir / "resume.log")
        self.assertEqual(rc, 0, again[-3000:])
        self.assertIn("(resumed)", again)
        self.assertRegex(again, r"stopped: budget; %d candidate evaluations" % budget)

    @staticmethod
    def children(pid):
        out = []
        for d in pathlib.Path("/proc").iterdir():
            if not d.name.isdigit():
                continue
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            if ppid == pid:
                out.append(int(d.name))
        return out

    def wait_for_rank(self, mpirun_pid, rank):
        deadline = time.time() + 60
        while time.time() < deadline:
            for pid in self.children(mpirun_pid):
                try:
                    env = pathlib.Path("/proc/%d/environ" % pid).read_bytes().split(b"\0")
                except OSError:
                    continue
                if b"OMPI_COMM_WORLD_RANK=%d" % rank in env:
                    return pid
            time.sleep(0.2)
        self.fail("no process of rank %d under mpirun" % rank)

    def wait_for_evaluations(self, db, n, job):
        deadline = time.time() + 300
        while time.time() < deadline:
            self.assertIsNone(job.poll(), "the campaign ended before the kill")
            try:
                con = sqlite3.connect("file:%s?mode=ro" % db, uri=True, timeout=1)
                try:
                    if con.execute("SELECT COUNT(*) FROM evaluations").fetchone()[0] >= n:
                        return
                finally:
                    con.close()
            except sqlite3.Error:
                pass
            time.sleep(0.5)
        self.fail("fewer than %d evaluations after 300 s" % n)


if __name__ == "__main__":
    PTXEVO = os.path.abspath(sys.argv.pop(1))
    unittest.main()
