// Text for a terminal: tenant data (a run title, an error a receiver sent) may hold control characters that a
// terminal obeys (a window title, a cleared screen, a forged line). Shown escaped, they are only text.

/** C0 and C1 controls and DEL; tabs and newlines of the caller's own layout are not tenant data inside a line. */
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/g;

const escape = (c: string): string => {
  const code = c.charCodeAt(0);
  if (c === '\n') return '\\n';
  if (c === '\r') return '\\r';
  if (c === '\t') return '\\t';
  return `\\x${code.toString(16).padStart(2, '0')}`;
};

/** One line of text with every control character escaped (`\x1b`, `\n`, ...). */
export const printable = (line: string): string => line.replace(CONTROL, escape);

/** JSON whose strings carry no control character raw: JSON escapes C0 itself, not DEL or C1. */
export const printableJson = (value: unknown): string =>
  JSON.stringify(value, null, 2).replace(
    /[\u007f-\u009f]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
