#!/usr/bin/env python3
"""A stand-in for Loki Mode's trigger server (asklokesh/loki-mode, autonomy/trigger-server.py), for the bench's
peer row only. Loki Mode is under the Business Source License 1.1, so its code is not copied into this repository;
this file is written from a reading of its POST /webhook handler and does the same work per delivery, with the
Python standard library only, as the original does:

- a thread per connection (socketserver.ThreadingMixIn over http.server.HTTPServer), HTTP/1.0 answers (the
  connection closes after each one), and one log line per request on stderr through `logging`;
- the body read by Content-Length (5 MiB cap, 15 s socket timeout), then X-Hub-Signature-256 checked as
  "sha256=" + hex HMAC-SHA256 of the body with hmac.compare_digest, then json.loads (a JSON object required);
- X-GitHub-Event must be one it handles (issues, pull_request, workflow_run), else 200 "unsupported";
- X-GitHub-Delivery deduplicated in memory (an insertion-ordered dict of the last 2,048 ids, under a lock);
- the event put on a bounded in-memory queue.Queue (503 when full) and answered 202 {"event","action","status"};
- 4 worker threads drain the queue: each reads the proof pointer file (.loki/state/last-proof-id.txt) under a lock,
  then handles the event (an `issues` event other than `opened` is skipped; `opened` would run `loki start`) and
  appends one JSON line to .loki/triggers/events.log, opening the file each time under a lock.

Nothing it accepts is on disk before its 202: the queue is memory (the peer's design, not the stand-in's).
Usage: loki-trigger-standin.py [--queue-size N]; GITHUB_WEBHOOK_SECRET in the environment; prints its URL.
"""
import argparse
import collections
import hashlib
import hmac
import http.server
import json
import logging
import os
import queue
import socketserver
import sys
import threading
from datetime import datetime
from pathlib import Path

HANDLED = ("issues", "pull_request", "workflow_run")
MAX_BODY = 5 * 1024 * 1024
DEDUP_MAX = 2048
WORKERS = 4

LOG_LOCK = threading.Lock()
POINTER_LOCK = threading.Lock()
TRIGGERS = Path(".loki") / "triggers"


def now():
    return datetime.utcnow().strftime("%Y-%m-%dT%H:%M:%SZ")


def record(event, action, summary, status):
    TRIGGERS.mkdir(parents=True, exist_ok=True)
    line = json.dumps({"timestamp": now(), "event": event, "action": action, "summary": summary, "status": status})
    with LOG_LOCK:
        with open(TRIGGERS / "events.log", "a") as f:
            f.write(line + "\n")


def proof_pointer():
    try:
        return Path(".loki/state/last-proof-id.txt").read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return ""


class Intake:
    def __init__(self, queue_size):
        self.queue = queue.Queue(maxsize=max(1, queue_size))
        self.seen = collections.OrderedDict()
        self.seen_lock = threading.Lock()
        self.dispatched = 0
        for i in range(WORKERS):
            threading.Thread(target=self.drain, name="worker-%d" % i, daemon=True).start()

    def repeat(self, delivery):
        if not delivery:
            return False
        with self.seen_lock:
            if delivery in self.seen:
                return True
            self.seen[delivery] = True
            while len(self.seen) > DEDUP_MAX:
                self.seen.popitem(last=False)
            return False

    def drain(self):
        while True:
            try:
                event, payload = self.queue.get(timeout=0.5)
            except queue.Empty:
                continue
            try:
                with POINTER_LOCK:
                    self.dispatched += 1
                    proof_pointer()
                action = payload.get("action", "")
                if event == "issues" and action == "opened":
                    status = "fired (dry run)"
                else:
                    status = "skipped (action=%s)" % action
                record(event, action, "", status)
            finally:
                self.queue.task_done()


class Handler(http.server.BaseHTTPRequestHandler):
    secret = ""
    intake = None

    def log_message(self, format, *args):
        logging.info("%s - %s", self.address_string(), format % args)

    def reply(self, code, data):
        body = json.dumps(data).encode("utf-8")
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def body(self):
        try:
            length = int(self.headers.get("Content-Length", 0))
        except (TypeError, ValueError):
            self.reply(400, {"error": "invalid Content-Length"})
            return None
        if length < 0 or length > MAX_BODY:
            self.reply(413, {"error": "payload too large"})
            return None
        before = self.connection.gettimeout()
        self.connection.settimeout(15)
        try:
            data = self.rfile.read(length)
        except OSError:
            self.reply(408, {"error": "request body timeout"})
            return None
        finally:
            self.connection.settimeout(before)
        if len(data) != length:
            self.reply(400, {"error": "incomplete request body"})
            return None
        return data

    def do_GET(self):
        if self.path.split("?", 1)[0] == "/health":
            self.reply(200, {"status": "ok"})
        else:
            self.reply(404, {"error": "not found"})

    def do_POST(self):
        if self.path.split("?", 1)[0] != "/webhook":
            self.reply(404, {"error": "not found"})
            return
        data = self.body()
        if data is None:
            return
        event = self.headers.get("X-GitHub-Event", "")
        signature = self.headers.get("X-Hub-Signature-256", "")
        delivery = self.headers.get("X-GitHub-Delivery", "")
        if not self.secret:
            record(event, "", "", "rejected (no secret configured)")
            self.reply(503, {"error": "webhook secret not configured"})
            return
        expected = "sha256=" + hmac.new(self.secret.encode("utf-8"), data, hashlib.sha256).hexdigest()
        if not signature or not hmac.compare_digest(expected, signature):
            record(event, "", "", "rejected (invalid signature)")
            self.reply(401, {"error": "invalid signature"})
            return
        try:
            payload = json.loads(data)
        except json.JSONDecodeError:
            self.reply(400, {"error": "invalid JSON"})
            return
        if not isinstance(payload, dict):
            self.reply(400, {"error": "payload must be a JSON object"})
            return
        action = payload.get("action", "")
        if event not in HANDLED:
            record(event, action, "", "unsupported event: %s" % event)
            self.reply(200, {"event": event, "action": action, "status": "unsupported event: %s" % event})
            return
        if self.intake.repeat(delivery):
            record(event, action, "", "duplicate (delivery %s)" % delivery)
            self.reply(200, {"event": event, "action": action, "status": "duplicate"})
            return
        try:
            self.intake.queue.put_nowait((event, payload))
        except queue.Full:
            record(event, action, "", "rejected (queue full)")
            self.reply(503, {"error": "server busy, retry later"})
            return
        self.reply(202, {"event": event, "action": action, "status": "queued"})


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--queue-size", type=int, default=64)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s [%(levelname)s] %(message)s",
                        datefmt="%Y-%m-%dT%H:%M:%SZ")
    Handler.secret = os.environ.get("GITHUB_WEBHOOK_SECRET", "")
    Handler.intake = Intake(args.queue_size)
    server = Server(("127.0.0.1", 0), Handler)
    sys.stdout.write("http://127.0.0.1:%d\n" % server.server_address[1])
    sys.stdout.flush()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
