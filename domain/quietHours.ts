// When a person can be reached by push: quiet hours (a daily window in their own time zone, which may cross
// midnight, on the days given), do-not-disturb until a time, and the kinds that break through both. Pure: no I/O,
// no Node builtins (the digest workflow's activities and the API both ask it; Intl is part of the language).

export const WEEKDAYS = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'] as const;
export type Weekday = (typeof WEEKDAYS)[number];

export interface QuietHours {
  /** `HH:MM`, wall time in `timeZone`. */
  start: string;
  /** `HH:MM`; at or before `start`: the window ends the next day. */
  end: string;
  /** An IANA zone name. */
  timeZone: string;
  /** The days a window starts on (a Friday 22:00–07:00 window ends on Saturday); absent: every day. */
  days?: Weekday[];
}

export interface HoldPrefs {
  quietHours?: QuietHours;
  /** Past: ignored. */
  doNotDisturbUntil?: Date;
  /** The kinds that still arrive during quiet hours and do-not-disturb. */
  breakThrough: readonly string[];
}

/** A run waits on the answer: this kind reaches a person at night unless they say otherwise. */
export const DEFAULT_BREAK_THROUGH: readonly string[] = ['human_input_requested'];

/** Do-not-disturb may be set at most this far ahead. */
export const MAX_DO_NOT_DISTURB_MS = 7 * 24 * 3600_000;

/**
 * The zone's canonical IANA name (`aFrica/abIdjan` is `Africa/Abidjan`: Intl accepts any letter case), or
 * undefined for a zone this runtime does not know. Prefs store this name, so one zone is one cached formatter.
 */
export function canonicalTimeZone(zone: string): string | undefined {
  if (!zone) return undefined;
  try {
    return new Intl.DateTimeFormat('en-US', { timeZone: zone }).resolvedOptions().timeZone;
  } catch {
    return undefined; // RangeError: not a zone this runtime knows
  }
}

export const isTimeZone = (zone: string): boolean => canonicalTimeZone(zone) !== undefined;

export const isClockTime = (time: string): boolean => /^([01]\d|2[0-3]):[0-5]\d$/.test(time);

export const isWeekday = (day: string): day is Weekday => (WEEKDAYS as readonly string[]).includes(day);

/** What is wrong with a quiet-hours setting, in words for a 400; undefined: nothing. */
export function quietHoursProblem(quiet: QuietHours): string | undefined {
  if (!isClockTime(quiet.start)) return `quietHours.start must be HH:MM (00:00 to 23:59), not ${quiet.start}`;
  if (!isClockTime(quiet.end)) return `quietHours.end must be HH:MM (00:00 to 23:59), not ${quiet.end}`;
  if (quiet.start === quiet.end) return 'quietHours.start and quietHours.end must differ';
  if (!isTimeZone(quiet.timeZone)) return `quietHours.timeZone is not an IANA time zone: ${quiet.timeZone}`;
  const days = quiet.days ?? [];
  if (new Set(days).size !== days.length || days.length > WEEKDAYS.length)
    return `quietHours.days must name each day once (at most ${WEEKDAYS.length})`;
  const wrong = days.filter((day) => !isWeekday(day));
  if (wrong.length) return `quietHours.days must be among ${WEEKDAYS.join(', ')}; not ${wrong.join(', ')}`;
  if (quiet.days && !quiet.days.length)
    return 'quietHours.days must name at least one day (absent: every day)';
  return undefined;
}

/**
 * Formatters by canonical zone (each holds some 28 KB outside V8's heap): a spelling that is not canonical builds
 * one to learn its zone and keeps none of its own. Bounded above the ~600 IANA zones, oldest out first.
 */
const formatters = new Map<string, Intl.DateTimeFormat>();
const MAX_CACHED_ZONES = 1000;

/** How many formatters are cached (for the test of its bound). */
export const cachedZoneCount = (): number => formatters.size;

function formatterFor(zone: string): Intl.DateTimeFormat {
  const cached = formatters.get(zone);
  if (cached) return cached;
  const formatter = new Intl.DateTimeFormat('en-US', {
    timeZone: zone,
    hourCycle: 'h23',
    year: 'numeric',
    month: 'numeric',
    day: 'numeric',
    hour: 'numeric',
    minute: 'numeric',
    second: 'numeric',
  });
  const canonical = formatter.resolvedOptions().timeZone;
  const known = formatters.get(canonical);
  if (known) return known;
  if (formatters.size >= MAX_CACHED_ZONES) formatters.delete(formatters.keys().next().value!);
  formatters.set(canonical, formatter);
  return formatter;
}

/** The wall clock in `zone` at `instant`, read as if it were UTC (ms). */
function wallAsUtc(instant: number, zone: string): number {
  const parts: Record<string, number> = {};
  for (const part of formatterFor(zone).formatToParts(new Date(instant)))
    if (part.type !== 'literal') parts[part.type] = Number(part.value);
  return Date.UTC(parts.year, parts.month - 1, parts.day, parts.hour, parts.minute, parts.second);
}

/** The zone's offset from UTC at `instant`, in ms (whole seconds). */
const offsetAt = (instant: number, zone: string): number =>
  wallAsUtc(Math.floor(instant / 1000) * 1000, zone) - Math.floor(instant / 1000) * 1000;

const DAY_MS = 24 * 3600_000;

/**
 * The instant a wall time in `zone` names (`wall`: that wall time read as UTC, ms). A wall time that occurs twice
 * (the hour a clock goes back) is its earlier instant; one that does not exist (the hour a clock goes forward)
 * is read with the offset before the switch, so it lands as far past the switch as it was past the old hour
 * (02:30 on a spring-forward night at 02:00 is 03:30), as JavaScript's Temporal does by default.
 */
export function wallTimeToInstant(wall: number, zone: string): Date {
  const before = offsetAt(wall - DAY_MS, zone);
  const after = offsetAt(wall + DAY_MS, zone);
  const valid = [...new Set([before, after])]
    .map((offset) => wall - offset)
    .filter((instant) => wallAsUtc(instant, zone) === wall)
    .sort((a, b) => a - b);
  return new Date(valid.length ? valid[0] : wall - before);
}

const minutesOf = (time: string): number => Number(time.slice(0, 2)) * 60 + Number(time.slice(3, 5));

/** Monday 0 … Sunday 6, of a calendar date held as UTC midnight. */
const weekdayOf = (dateUtc: number): Weekday => WEEKDAYS[(new Date(dateUtc).getUTCDay() + 6) % 7];

/** The end of the quiet window `now` falls in, or undefined when it falls in none. */
export function quietUntil(quiet: QuietHours, now: Date): Date | undefined {
  const start = minutesOf(quiet.start);
  const end = minutesOf(quiet.end);
  const crossesMidnight = end <= start;
  const wallNow = wallAsUtc(now.getTime(), quiet.timeZone);
  const today = Math.floor(wallNow / DAY_MS) * DAY_MS;
  // A window that crosses midnight may have started yesterday; one that does not, only today.
  for (const day of crossesMidnight ? [today - DAY_MS, today] : [today]) {
    if (quiet.days && !quiet.days.includes(weekdayOf(day))) continue;
    const from = wallTimeToInstant(day + start * 60_000, quiet.timeZone);
    const until = wallTimeToInstant(day + (crossesMidnight ? DAY_MS : 0) + end * 60_000, quiet.timeZone);
    if (from.getTime() <= now.getTime() && now.getTime() < until.getTime()) return until;
  }
  return undefined;
}

/**
 * When this person can next be reached by a push of `kind`: undefined for now. Do-not-disturb and quiet hours
 * hold alike, and one may follow the other (do-not-disturb that ends inside a quiet window holds to its end);
 * a kind that breaks through is never held.
 */
export function heldUntil(prefs: HoldPrefs, kind: string, now: Date): Date | undefined {
  if (prefs.breakThrough.includes(kind)) return undefined;
  let at = now.getTime();
  // Each step moves forward past one hold; two holds can alternate only a few times in a row.
  for (let step = 0; step < 4; step++) {
    const dnd = prefs.doNotDisturbUntil?.getTime();
    if (dnd !== undefined && dnd > at) {
      at = dnd;
      continue;
    }
    const quiet = prefs.quietHours && quietUntil(prefs.quietHours, new Date(at));
    if (!quiet) break;
    at = quiet.getTime();
  }
  return at > now.getTime() ? new Date(at) : undefined;
}
