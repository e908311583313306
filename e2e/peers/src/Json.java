import java.nio.charset.StandardCharsets;

/** JSON string literals for the peers' one-line JSON output (they need no JSON library). */
final class Json {
    private Json() {}

    /** Appends {@code bytes} decoded as UTF-8 as a JSON string, or {@code null}. */
    static void string(StringBuilder sb, byte[] bytes) {
        string(sb, bytes == null ? null : new String(bytes, StandardCharsets.UTF_8));
    }

    /** Appends {@code s} as a JSON string, or {@code null}. */
    static void string(StringBuilder sb, String s) {
        if (s == null) {
            sb.append("null");
            return;
        }
        sb.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"':
                    sb.append("\\\"");
                    break;
                case '\\':
                    sb.append("\\\\");
                    break;
                case '\n':
                    sb.append("\\n");
                    break;
                case '\r':
                    sb.append("\\r");
                    break;
                case '\t':
                    sb.append("\\t");
                    break;
                default:
                    if (c < 0x20) {
                        sb.append(String.format("\\u%04x", (int) c));
                    } else {
                        sb.append(c);
                    }
            }
        }
        sb.append('"');
    }
}
