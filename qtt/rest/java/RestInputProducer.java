// Produces the REST QTT runner's input records with Kafka's Java client, which writes every
// timestamp as given (librdkafka, under confluent-kafka, reads a timestamp of 0 as "now").
//
// Run with the Kafka client jars on the class path, in source-file mode:
//   java -cp 'LIB/*' RestInputProducer.java BOOTSTRAP_SERVERS
// One record per stdin line, tab-separated:
//   topic  partition|-  timestamp|-  key-base64|-  value-base64|-  headers
// where headers is empty or comma-separated KEY_BASE64:VALUE_BASE64 (VALUE '-' for null).
// Each line is answered on stdout with "OK partition offset" or "ERR message", once the
// broker acknowledged the record (acks=all). The line "RESET" closes the producer and opens a
// new one, answered "READY": the harness sends it after deleting topics, since a producer keeps
// a deleted topic's partitions in its metadata and would send to a partition that a topic of
// the same name made again with fewer partitions lacks (the record then expires).
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.Properties;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.header.internals.RecordHeaders;

public class RestInputProducer {
  public static void main(String[] args) throws Exception {
    Properties props = new Properties();
    props.put("bootstrap.servers", args[0]);
    props.put("key.serializer", "org.apache.kafka.common.serialization.ByteArraySerializer");
    props.put("value.serializer", "org.apache.kafka.common.serialization.ByteArraySerializer");
    props.put("acks", "all");
    props.put("enable.idempotence", "true");
    props.put("linger.ms", "0");
    props.put("max.block.ms", "30000");
    props.put("delivery.timeout.ms", "30000");
    props.put("request.timeout.ms", "20000");
    Base64.Decoder b64 = Base64.getDecoder();
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props);
    try {
      System.out.println("READY");
      System.out.flush();
      String line;
      while ((line = in.readLine()) != null) {
        if (line.isEmpty()) {
          continue;
        }
        if (line.equals("RESET")) {
          producer.close();
          producer = new KafkaProducer<>(props);
          System.out.println("READY");
          System.out.flush();
          continue;
        }
        String[] f = line.split("\t", -1);
        try {
          RecordHeaders headers = new RecordHeaders();
          if (f.length > 5 && !f[5].isEmpty()) {
            for (String h : f[5].split(",")) {
              String[] kv = h.split(":", 2);
              String key = new String(b64.decode(kv[0]), StandardCharsets.UTF_8);
              headers.add(key, kv[1].equals("-") ? null : b64.decode(kv[1]));
            }
          }
          ProducerRecord<byte[], byte[]> record = new ProducerRecord<>(
              f[0],
              f[1].equals("-") ? null : Integer.valueOf(f[1]),
              f[2].equals("-") ? null : Long.valueOf(f[2]),
              f[3].equals("-") ? null : b64.decode(f[3]),
              f[4].equals("-") ? null : b64.decode(f[4]),
              headers);
          RecordMetadata meta = producer.send(record).get();
          System.out.println("OK " + meta.partition() + " " + meta.offset());
        } catch (Exception e) {
          Throwable root = e;
          while (root.getCause() != null) {
            root = root.getCause();
          }
          System.out.println("ERR " + String.valueOf(root).replace('\n', ' '));
        }
        System.out.flush();
      }
    } finally {
      producer.close();
    }
  }
}
