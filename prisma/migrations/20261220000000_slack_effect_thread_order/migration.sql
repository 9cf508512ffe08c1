-- AlterTable
ALTER TABLE "SlackEffect" ADD COLUMN     "seq" BIGSERIAL NOT NULL,
ADD COLUMN     "threadId" UUID;

-- CreateIndex
CREATE INDEX "SlackEffect_threadId_seq_idx" ON "SlackEffect"("threadId", "seq");

-- Messages still due from before the upgrade are ordered in their threads like new ones.
UPDATE "SlackEffect" SET "threadId" = "subjectId"
WHERE state = 'due' AND kind IN ('run.message', 'run.file', 'flow.post', 'flow.file', 'flow.edited', 'flow.reminder');

UPDATE "SlackEffect" e SET "threadId" = r."executionId"
FROM "Review" r
WHERE e.state = 'due' AND r.id = e."subjectId"
  AND e.kind IN ('review.post', 'review.file', 'review.diff', 'review.edited', 'review.reminder', 'review.deadline');
