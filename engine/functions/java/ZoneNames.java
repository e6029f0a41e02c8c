import java.time.Instant;
import java.time.ZoneId;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.util.Locale;
import java.util.TreeSet;

/**
 * Writes the names Java's DateTimeFormatter prints for pattern letters z (zzz) and zzzz in
 * ksqlDB's default US locale, per zone id, in standard and in daylight time, as the JSON of
 * engine/functions/java_zone_names.json:
 *
 *   java engine/functions/java/ZoneNames.java > engine/functions/java_zone_names.json
 *
 * A zone's daylight names are those of the first instant in daylight time found from 1900 on
 * (the names do not change with the date); a zone that had none from 1900 to 2040 has none.
 */
public final class ZoneNames {
  public static void main(final String[] args) {
    final DateTimeFormatter shortName = DateTimeFormatter.ofPattern("zzz", Locale.US);
    final DateTimeFormatter longName = DateTimeFormatter.ofPattern("zzzz", Locale.US);
    final Instant start = Instant.parse("1900-01-01T00:00:00Z");
    final StringBuilder out = new StringBuilder("{\n");
    boolean first = true;
    for (final String id : new TreeSet<>(ZoneId.getAvailableZoneIds())) {
      final ZoneId zone = ZoneId.of(id);
      final String[] names = new String[4];
      for (int week = 0; week < 52 * 140 && (names[0] == null || names[2] == null); week++) {
        final Instant at = start.plusSeconds(7L * 86400L * week);
        final ZonedDateTime local = at.atZone(zone);
        final int k = zone.getRules().isDaylightSavings(at) ? 2 : 0;
        if (names[k] == null) {
          names[k] = local.format(shortName);
          names[k + 1] = local.format(longName);
        }
      }
      out.append(first ? "" : ",\n").append("  \"").append(id).append("\": [");
      for (int i = 0; i < 4; i++) {
        out.append(i == 0 ? "" : ", ").append(names[i] == null ? "null" : "\"" + names[i] + "\"");
      }
      out.append("]");
      first = false;
    }
    System.out.print(out.append("\n}\n"));
  }
}
