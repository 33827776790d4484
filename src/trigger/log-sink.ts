// A stderr sink for the trigger server's JSON-lines log that coalesces the lines of one event-loop turn
// into a single write. stderr to a pipe or file is a synchronous syscall per write in Node; under a burst
// of deliveries one write per line cost as much as the HMAC. Lines keep their order, and whatever is still
// buffered is written synchronously when the process exits (including after an uncaught exception).
export interface LogSink {
  write(line: string): void;
  /** Writes anything buffered now. */
  flush(): void;
}

export function createCoalescingSink(out: (text: string) => void = (text) => void process.stderr.write(text)): LogSink {
  let buffered: string[] = [];
  let scheduled = false;

  function flush(): void {
    scheduled = false;
    if (buffered.length === 0) return;
    const text = buffered.length === 1 ? buffered[0]! : buffered.join('');
    buffered = [];
    out(text);
  }

  return {
    write(line) {
      buffered.push(line);
      if (scheduled) return;
      scheduled = true;
      setImmediate(flush);
    },
    flush,
  };
}

let shared: LogSink | undefined;

/** The process-wide stderr sink (one exit hook however many servers a process starts). */
export function stderrSink(): LogSink {
  if (!shared) {
    const sink = createCoalescingSink();
    process.once('exit', sink.flush);
    shared = sink;
  }
  return shared;
}
