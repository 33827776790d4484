// A streaming JSON reader for the gate's meters (usage.ts): keeps only the values at a few key paths of a request or
// response body as its bytes pass, never the rest (docs/gate.md "Metered cost" says which, and why that is safe).

/** Bytes kept of one picked value (a usage object is a few hundred), of a key, and nesting followed to a wanted one. */
const PICK_MAX = 16 * 1024;
const KEY_MAX = 64;
const DEPTH_MAX = 64;

/** One object or array on the way to a wanted path: only these are read key by key. */
interface Frame {
  array: boolean;
  /** The keys that lead here, joined by "." (arrays not counted). */
  path: string;
  /** The key whose value comes next (an object's), null when unreadable (too long). */
  key: string | null;
}

/**
 * The raw text of each value at the wanted key paths (keys joined by ".", arrays not counted), as each ends. Only the
 * objects on the way to a wanted path are read key by key; any other value is skipped whole, its strings to their
 * closing quote.
 */
export class JsonPicker {
  private readonly stack: Frame[] = [];
  private readonly wanted: ReadonlySet<string>;
  /** The paths that lead to a wanted one ("" is the top). */
  private readonly leading: ReadonlySet<string>;
  /** The paths below the top that lead to a wanted one, as their objects are entered. */
  private readonly entered = new Set<string>();
  private expectKey = false;
  private inString = false;
  private escaped = false;
  /** The key being read (a string in a followed object), else null. */
  private key: number[] | null = null;
  /** A value skipped or captured: open while `inValue`, its nesting (0 for a string or a bare scalar). */
  private inValue = false;
  private scalar = false;
  private nest = 0;
  private capturePath: string | null = null;
  private captured: number[] = [];
  /**
   * Something could hide a wanted value from this reader: a key spelled with an escape where a wanted key may be,
   * objects nested past DEPTH_MAX on the way, or a wanted value longer than PICK_MAX.
   */
  doubtful = false;
  readonly picks: Array<{ path: string; text: string }> = [];
  private readonly one = new Uint8Array(1);

  /** Other spellings the API reads as one key (Gemini's snake_case): read as that key, so a second is a repeat. */
  private readonly aliases: ReadonlyMap<string, string>;
  /** Paths leading to a wanted key that hold a list of objects (Responses' `input` items): each item is read, none
   * doubted as a second value, and a value of another kind (a string) is skipped. */
  private readonly lists: ReadonlySet<string>;

  constructor(
    wanted: ReadonlySet<string>, aliases: ReadonlyMap<string, string> = new Map(),
    lists: ReadonlySet<string> = new Set(),
  ) {
    this.wanted = wanted;
    this.aliases = aliases;
    this.lists = lists;
    const leading = new Set(['']);
    for (const path of wanted) {
      const keys = path.split('.');
      for (let n = 1; n < keys.length; n++) leading.add(keys.slice(0, n).join('.'));
    }
    this.leading = leading;
  }

  byte(b: number): void {
    this.one[0] = b;
    this.push(this.one);
  }

  push(bytes: Uint8Array): void {
    for (let i = 0; i < bytes.length; i++) {
      if (this.inString) i = this.string(bytes, i);
      else if (this.inValue) this.valueByte(bytes[i]!);
      else this.structure(bytes[i]!);
    }
  }

  /** Reads a string from `i` to its closing quote or the chunk's end; returns the last index read. */
  private string(bytes: Uint8Array, i: number): number {
    let from = i;
    if (this.escaped) {
      this.escaped = false;
      from = i + 1;
    }
    for (;;) {
      // The next quote closes the string unless an odd run of backslashes before it escapes it: the escapes between
      // (`\n`, `\\`: a request's text is full of them) cost nothing apart.
      const quote = bytes.indexOf(0x22, from);
      const end = quote < 0 ? bytes.length : quote;
      let run = 0;
      while (end - run - 1 >= from && bytes[end - run - 1] === 0x5c) run += 1;
      // An escape may spell a wanted key (`"max_tok\u0065ns"`): what it names is not known, so neither is the value.
      // Known at the first backslash, and each byte looked at once (a key of escaped quotes is no rescan).
      if (this.key !== null && !this.doubtful && bytes.subarray(from, end).includes(0x5c)) this.doubtful = true;
      if (quote >= 0 && run % 2 === 1) {
        from = quote + 1;
        continue;
      }
      if (quote < 0) {
        // A backslash that ends the chunk escapes the first byte of the next.
        this.escaped = run % 2 === 1;
        this.keep(bytes, i, bytes.length);
        return bytes.length - 1;
      }
      this.keep(bytes, i, quote + (this.key === null ? 1 : 0));
      this.inString = false;
      if (this.key !== null) this.keyRead();
      else if (this.nest === 0) this.valueEnds();
      return quote;
    }
  }

  /** Bytes of a key, or of a captured value, within their bounds. */
  private keep(bytes: Uint8Array, from: number, to: number): void {
    const into = this.key ?? (this.capturePath !== null ? this.captured : null);
    if (into === null) return;
    const room = (this.key !== null ? KEY_MAX + 1 : PICK_MAX + 1) - into.length;
    for (let i = from; i < Math.min(to, from + Math.max(0, room)); i++) into.push(bytes[i]!);
    if (this.key === null && this.captured.length > PICK_MAX) {
      // Too long to be a value the meter reads: skipped, and a wanted value it could be is not known.
      this.doubtful = true;
      this.capturePath = null;
      this.captured = [];
    }
  }

  private keepByte(b: number): void {
    if (this.capturePath === null) return;
    this.one[0] = b;
    this.keep(this.one, 0, 1);
  }

  private keyRead(): void {
    const top = this.stack.at(-1);
    const bytes = this.key!;
    this.key = null;
    if (!top) return;
    const key = bytes.length <= KEY_MAX ? Buffer.from(bytes).toString('utf8') : null;
    top.key = key === null ? null : (this.aliases.get(key) ?? key);
  }

  /** A byte of a value skipped or captured, outside its strings. */
  private valueByte(b: number): void {
    if (this.scalar) {
      // A number or literal ends at what follows it, which the frame holding it reads.
      if (b === 0x2c || b === 0x7d || b === 0x5d || b === 0x20 || b === 0x09 || b === 0x0a || b === 0x0d) {
        this.valueEnds();
        this.structure(b);
        return;
      }
      this.keepByte(b);
      return;
    }
    this.keepByte(b);
    if (b === 0x22) this.inString = true;
    else if (b === 0x7b || b === 0x5b) this.nest += 1;
    else if (b === 0x7d || b === 0x5d) {
      this.nest -= 1;
      if (this.nest === 0) this.valueEnds();
    }
  }

  private valueEnds(): void {
    if (this.capturePath !== null) {
      this.picks.push({ path: this.capturePath, text: Buffer.from(this.captured).toString('utf8') });
    }
    this.inValue = false;
    this.capturePath = null;
    this.captured = [];
  }

  /** A byte between the keys and values of the objects and arrays on the way to a wanted path. */
  private structure(b: number): void {
    switch (b) {
      case 0x7d: // }
      case 0x5d: // ]
        this.stack.pop();
        this.expectKey = false;
        return;
      case 0x2c: // ,
        this.expectKey = this.stack.at(-1)?.array === false;
        return;
      case 0x3a: // :
        this.expectKey = false;
        return;
      case 0x20: case 0x09: case 0x0a: case 0x0d:
        return;
      case 0x22: // "
        if (this.expectKey) {
          this.inString = true;
          this.key = [];
          return;
        }
    }
    // Where a key must start, any other byte is no JSON this reader walks (a NUL of UTF-16): what it says is not known.
    if (this.expectKey) this.doubtful = true;
    else this.valueStarts(b);
  }

  /** A value's first byte: captured at a wanted path, followed on the way to one, else skipped whole. */
  private valueStarts(b: number): void {
    const top = this.stack.at(-1);
    const path = !top ? '' : top.array ? top.path : top.key === null ? null : joinKey(top.path, top.key);
    const container = b === 0x7b || b === 0x5b;
    if (path !== null && path !== '' && !this.wanted.has(path) && this.leading.has(path) && !this.lists.has(path)) {
      // A second value, or one not an object, where an object leads to a wanted key (`generationConfig`): the API
      // may read the one without that key.
      if (b !== 0x7b || this.entered.has(path)) this.doubtful = true;
      this.entered.add(path);
    }
    if (path !== null && container && !this.wanted.has(path) && this.leading.has(path)) {
      if (this.stack.length < DEPTH_MAX) {
        this.stack.push({ array: b === 0x5b, path, key: null });
        this.expectKey = b === 0x7b;
        return;
      }
      this.doubtful = true;
    }
    this.inValue = true;
    this.scalar = !container && b !== 0x22;
    this.nest = container ? 1 : 0;
    this.inString = b === 0x22;
    this.capturePath = path !== null && this.wanted.has(path) ? path : null;
    this.captured = this.capturePath === null ? [] : [b];
  }

  /** A value still open at the end of the text was cut short, and is dropped. */
  finish(): void {
    this.capturePath = null;
    this.captured = [];
  }
}

const joinKey = (path: string, key: string): string => (path === '' ? key : `${path}.${key}`);
