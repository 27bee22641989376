// What Slack documents for an incoming-webhook message with Block Kit, checked the way Slack would refuse it
// (`invalid_blocks`, `invalid_payload`): the loopback Slack stand-in and the renderer's unit test both use it.
// Written from Slack's reference (blocks, text objects, button element), not from our renderer.

const TOP_LEVEL = new Set([
  'text',
  'blocks',
  'attachments',
  'thread_ts',
  'mrkdwn',
  'unfurl_links',
  'unfurl_media',
]);

type Json = Record<string, unknown>;

export function slackShapeProblems(message: unknown): string[] {
  const problems: string[] = [];
  if (!isObject(message)) return ['the body is not a JSON object'];
  for (const key of Object.keys(message)) if (!TOP_LEVEL.has(key)) problems.push(`unknown field ${key}`);
  const { text, blocks } = message;
  if (text === undefined && blocks === undefined) problems.push('neither text nor blocks');
  if (text !== undefined && (typeof text !== 'string' || text.length === 0))
    problems.push('text is not a string');
  if (blocks === undefined) return problems;
  if (!Array.isArray(blocks) || blocks.length === 0 || blocks.length > 50)
    return [...problems, 'blocks: 1 to 50'];
  blocks.forEach((block: unknown, i) =>
    problems.push(...blockProblems(block).map((p) => `blocks[${i}]: ${p}`)),
  );
  return problems;
}

function blockProblems(block: unknown): string[] {
  if (!isObject(block)) return ['not an object'];
  switch (block.type) {
    case 'header':
      return textProblems(block.text, 150, ['plain_text']);
    case 'section': {
      if (block.text === undefined && block.fields === undefined) return ['a section needs text or fields'];
      const problems =
        block.text === undefined ? [] : textProblems(block.text, 3000, ['plain_text', 'mrkdwn']);
      if (block.fields !== undefined) {
        if (!Array.isArray(block.fields) || block.fields.length === 0 || block.fields.length > 10) {
          problems.push('fields: 1 to 10');
        } else {
          for (const field of block.fields)
            problems.push(...textProblems(field, 2000, ['plain_text', 'mrkdwn']));
        }
      }
      return problems;
    }
    case 'actions': {
      const { elements } = block;
      if (!Array.isArray(elements) || elements.length === 0 || elements.length > 25)
        return ['elements: 1 to 25'];
      return elements.flatMap((element: unknown) => buttonProblems(element));
    }
    case 'divider':
      return [];
    case 'context': {
      const { elements } = block;
      if (!Array.isArray(elements) || elements.length === 0 || elements.length > 10)
        return ['elements: 1 to 10'];
      return elements.flatMap((element: unknown) => textProblems(element, 3000, ['plain_text', 'mrkdwn']));
    }
    default:
      return [`a block type this stand-in does not accept: ${String(block.type)}`];
  }
}

function buttonProblems(element: unknown): string[] {
  if (!isObject(element) || element.type !== 'button') return ['not a button'];
  const problems = textProblems(element.text, 75, ['plain_text']);
  if (element.url !== undefined) {
    if (typeof element.url !== 'string' || element.url.length > 3000 || !/^https?:\/\//.test(element.url)) {
      problems.push('button url: an http(s) URL of at most 3,000 characters');
    }
  }
  return problems;
}

function textProblems(text: unknown, max: number, types: string[]): string[] {
  if (!isObject(text) || !types.includes(String(text.type)))
    return [`a text object of type ${types.join('/')}`];
  if (typeof text.text !== 'string' || text.text.length === 0) return ['empty text'];
  if (text.text.length > max) return [`text of ${text.text.length} > ${max}`];
  return [];
}

function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
