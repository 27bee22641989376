// Cutting text people or callers wrote to a bound, by whole code points. No Node builtins: pure.

/**
 * The text, or its first `max - 1` code points and an ellipsis when it has more than `max` (never half a surrogate
 * pair). Reads no more of a long text than the bound needs.
 */
export function cutCodePoints(text: string, max: number): string {
  // Each code point is one or two UTF-16 units: this many hold more than `max` of them whenever the text does.
  const points = Array.from(text.slice(0, 2 * max + 2));
  return points.length <= max ? text : `${points.slice(0, Math.max(0, max - 1)).join('')}…`;
}

/** The first `count` code points (never half a surrogate pair), reading no more of a long text than that. */
export const firstCodePoints = (text: string, count: number): string =>
  Array.from(text.slice(0, 2 * count))
    .slice(0, count)
    .join('');

/** Its first `units` UTF-16 units, one fewer where the last would be half a surrogate pair; `cut` when it was longer. */
export function headUnits(text: string, units: number): { head: string; cut: boolean } {
  if (text.length <= units) return { head: text, cut: false };
  if (units <= 0) return { head: '', cut: true };
  const last = text.charCodeAt(units - 1);
  return { head: text.slice(0, last >= 0xd800 && last <= 0xdbff ? units - 1 : units), cut: true };
}

/**
 * The text, or its head and an ellipsis within `max` UTF-16 units when it has more (never half a surrogate pair):
 * for bounds a byte budget follows, such as a push's payload.
 */
export function clipUnits(text: string, max: number): string {
  if (text.length <= max) return text;
  return max <= 0 ? '' : `${headUnits(text, max - 1).head}…`;
}
