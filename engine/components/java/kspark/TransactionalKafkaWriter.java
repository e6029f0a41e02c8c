package kspark;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.utils.Utils;
import org.apache.spark.TaskContext;
import org.apache.spark.api.java.function.ForeachPartitionFunction;
import org.apache.spark.sql.Row;

/**
 * Writes one Spark partition of a micro-batch to a Kafka topic in one transaction, exactly once.
 *
 * <p>The transactional id is {@code kspark-<query id>-<partition index>}: a new producer's
 * initTransactions fences any zombie of an earlier attempt. Inside the transaction the producer
 * commits offset {@code batch id + 1} on partition 0 of the output topic for the consumer group
 * {@code _kspark-sink-<query id>-<partition index>}: the mark of the last batch this partition
 * wrote, visible atomically with its records, with the batch's layout as the mark's metadata
 * ({@code engine.runtime.kafka_sink.writer_layout}: how records were assigned to partitions).
 * A replayed batch finds the mark and writes nothing, provided the mark has the same layout: a
 * partition index only names the same records within one layout.
 * Rows: key (binary), value (binary), timestamp (bigint, epoch ms), headers
 * (array of struct key string, value binary), and optionally a partition key (binary): a
 * windowed V5 sink's key without the window. A row with a partition key goes to the partition
 * Kafka Streams' WindowedStreamPartitioner gives it, murmur2 of those bytes modulo the topic's
 * partition count; any other row goes where the producer's partitioner puts it (murmur2 of the
 * whole key).
 */
public final class TransactionalKafkaWriter implements ForeachPartitionFunction<Row>, Serializable {
  private static final long serialVersionUID = 1L;
  private static final Map<String, KafkaProducer<byte[], byte[]>> PRODUCERS = new ConcurrentHashMap<>();
  private static final Map<String, KafkaConsumer<byte[], byte[]>> CONSUMERS = new ConcurrentHashMap<>();

  private final String bootstrapServers;
  private final String topic;
  private final String queryId;
  private final long batchId;
  private final int transactionTimeoutMs;
  private final String layout;
  // The cluster's security properties (security.protocol, sasl.*, ssl.*): Java client names.
  private final HashMap<String, String> clientProperties;

  public TransactionalKafkaWriter(
      String bootstrapServers, String topic, String queryId, long batchId, int transactionTimeoutMs,
      String layout, Map<String, String> clientProperties) {
    this.clientProperties = new HashMap<>(clientProperties);
    this.bootstrapServers = bootstrapServers;
    this.topic = topic;
    this.queryId = queryId;
    this.batchId = batchId;
    this.transactionTimeoutMs = transactionTimeoutMs;
    this.layout = layout;
  }

  @Override
  public void call(Iterator<Row> rows) throws Exception {
    if (!rows.hasNext()) {
      return;
    }
    TaskContext task = TaskContext.get();
    int partition = task == null ? 0 : task.partitionId();
    String transactionalId = "kspark-" + queryId + "-" + partition;
    String group = "_kspark-sink-" + queryId + "-" + partition;
    TopicPartition mark = new TopicPartition(topic, 0);
    KafkaConsumer<byte[], byte[]> consumer = CONSUMERS.computeIfAbsent(group, this::consumer);
    KafkaProducer<byte[], byte[]> producer = PRODUCERS.computeIfAbsent(transactionalId, this::producer);
    try {
      OffsetAndMetadata written = consumer.committed(Collections.singleton(mark)).get(mark);
      if (written != null && written.offset() >= batchId + 1 && layout.equals(written.metadata())) {
        return; // a replayed batch this partition already wrote
      }
      producer.beginTransaction();
      int partitions = 0; // the topic's partition count, asked for by the first partition key
      while (rows.hasNext()) {
        Row row = rows.next();
        byte[] key = row.isNullAt(0) ? null : (byte[]) row.get(0);
        byte[] value = row.isNullAt(1) ? null : (byte[]) row.get(1);
        Long timestamp = row.isNullAt(2) ? null : row.getLong(2);
        Integer target = null;
        if (row.length() > 4 && !row.isNullAt(4)) {
          if (partitions == 0) {
            partitions = producer.partitionsFor(topic).size();
          }
          target = Utils.toPositive(Utils.murmur2((byte[]) row.get(4))) % partitions;
        }
        producer.send(new ProducerRecord<>(topic, target, timestamp, key, value, headers(row)));
      }
      producer.sendOffsetsToTransaction(
          Collections.singletonMap(mark, new OffsetAndMetadata(batchId + 1, layout)),
          new ConsumerGroupMetadata(group));
      producer.commitTransaction();
    } catch (Exception e) {
      // Fenced, timed out or failed: drop the producer; the retried task starts a new one,
      // whose initTransactions aborts whatever this one left open.
      PRODUCERS.remove(transactionalId);
      try {
        producer.close(java.time.Duration.ofSeconds(5));
      } catch (Exception ignored) {
        // closing a failed producer may fail too
      }
      throw e;
    }
  }

  private static List<Header> headers(Row row) {
    if (row.isNullAt(3)) {
      return null;
    }
    List<Row> entries = row.getList(3);
    List<Header> headers = new ArrayList<>(entries.size());
    for (Row entry : entries) {
      headers.add(new RecordHeader(entry.getString(0), entry.isNullAt(1) ? null : (byte[]) entry.get(1)));
    }
    return headers;
  }

  private KafkaProducer<byte[], byte[]> producer(String transactionalId) {
    Properties props = new Properties();
    props.putAll(clientProperties);
    props.put("bootstrap.servers", bootstrapServers);
    props.put("transactional.id", transactionalId);
    props.put("transaction.timeout.ms", Integer.toString(transactionTimeoutMs));
    props.put("enable.idempotence", "true");
    props.put("acks", "all");
    props.put("linger.ms", "5");
    props.put("client.id", transactionalId);
    KafkaProducer<byte[], byte[]> producer =
        new KafkaProducer<>(props, new ByteArraySerializer(), new ByteArraySerializer());
    producer.initTransactions();
    return producer;
  }

  private KafkaConsumer<byte[], byte[]> consumer(String group) {
    Properties props = new Properties();
    props.putAll(clientProperties);
    props.put("bootstrap.servers", bootstrapServers);
    props.put("group.id", group);
    props.put("isolation.level", "read_committed");
    props.put("enable.auto.commit", "false");
    props.put("client.id", group);
    return new KafkaConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer());
  }
}
