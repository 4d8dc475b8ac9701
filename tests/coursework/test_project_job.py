"""``python -m convs2s.course.project``, the program the sandbox runs to grade notebook 09's
project, writes the submission into a folder of its own: run by hand in a folder that holds a
student's ``final.pt``, it leaves that file as it was and nothing behind."""

from __future__ import annotations

import json
import subprocess
import sys

from convs2s.course import project


def test_a_grading_job_run_by_hand_writes_over_no_file_and_leaves_nothing(tmp_path):
    mine = tmp_path / project.SUBMISSION
    mine.write_bytes(b"a student's model, not to be written over")
    for name in (project.SUBMISSION, "../final.pt", ""):
        job = json.dumps({"direction": "fr-en", "sources": ["un chien"], "file": name}).encode()
        proc = subprocess.run([sys.executable, "-m", "convs2s.course.project"], cwd=tmp_path,
                              input=job + b"\nnot a checkpoint", capture_output=True,
                              timeout=600)
        assert proc.returncode == 0, proc.stderr.decode()[-2000:]
        said = json.loads(proc.stdout.decode().split(project.MARKER)[-1])
        # the file as the student named it, not the folder it was written into
        assert said["refused"].startswith(f"{project.SUBMISSION} is not a checkpoint"), \
            said
        assert "convs2s-project-" not in said["refused"], said
        assert mine.read_bytes() == b"a student's model, not to be written over", name
        assert sorted(p.name for p in tmp_path.iterdir()) == [project.SUBMISSION], name
        assert not (tmp_path.parent / project.SUBMISSION).exists()
