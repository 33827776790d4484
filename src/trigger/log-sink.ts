// A stderr sink for the trigger server's JSON-lines log that coalesces lines into few writes. stderr to a pipe or
// file is a synchronous syscall per write in Node (and a pipe write wakes the reader: journald, a supervisor);
// under a burst of deliveries one write per event-loop turn still cost ~9 % of the server's busy time, more than
// the HMAC. Lines are held for at most `windowMs` (or until `maxBytes` are waiting), keep their order, and
// whatever is still buffered is written synchronously when the process exits (including after an uncaught
// exception). A SIGKILL can lose at most that window's lines — never a delivery: those are in the database.
export interface LogSink {
  write(line: string): void;
  /** Writes anything buffered now. */
  flush(): void;
}

export interface CoalescingOptions {
  /** Longest a line waits for company before it is written; default 20 ms. */
  windowMs?: number;
  /** Buffered characters that trigger a write at once; default 16,384. */
  maxChars?: number;
}

export function createCoalescingSink(
  out: (text: string) => void = (text) => void process.stderr.write(text),
  { windowMs = 20, maxChars = 16_384 }: CoalescingOptions = {},
): LogSink {
  let buffered: string[] = [];
  let chars = 0;
  let timer: NodeJS.Timeout | undefined;

  function flush(): void {
    if (timer) clearTimeout(timer);
    timer = undefined;
    if (buffered.length === 0) return;
    const text = buffered.length === 1 ? buffered[0]! : buffered.join('');
    buffered = [];
    chars = 0;
    out(text);
  }

  return {
    write(line) {
      buffered.push(line);
      chars += line.length;
      if (chars >= maxChars) flush();
      else if (!timer) {
        timer = setTimeout(flush, windowMs);
        timer.unref();
      }
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
