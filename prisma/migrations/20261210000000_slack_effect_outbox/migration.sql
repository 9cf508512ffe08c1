-- AlterTable
ALTER TABLE "Execution" DROP COLUMN "noticeClaimedAt";

-- AlterTable
ALTER TABLE "Review" DROP COLUMN "postClaimedAt";

-- AlterTable
ALTER TABLE "FlowRequest" DROP COLUMN "postClaimedAt";

-- CreateTable
CREATE TABLE "SlackEffect" (
    "id" UUID NOT NULL,
    "kind" TEXT NOT NULL,
    "subjectId" UUID NOT NULL,
    "key" TEXT NOT NULL,
    "payload" JSONB,
    "state" TEXT NOT NULL DEFAULT 'due',
    "runAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "attempts" INTEGER NOT NULL DEFAULT 0,
    "generation" INTEGER NOT NULL DEFAULT 0,
    "leaseOwner" TEXT,
    "leaseExpiresAt" TIMESTAMP(3),
    "lastError" TEXT,
    "doneAt" TIMESTAMP(3),
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "SlackEffect_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "SlackEffect_key_key" ON "SlackEffect"("key");

-- CreateIndex
CREATE INDEX "SlackEffect_state_runAt_idx" ON "SlackEffect"("state", "runAt");

-- CreateIndex
CREATE INDEX "SlackEffect_subjectId_idx" ON "SlackEffect"("subjectId");


-- Work the claim-based recovery sweep of earlier versions would still have done is handed to the
-- outbox once, so that an upgrade in the middle of runs loses nothing.
INSERT INTO "SlackEffect" (id, kind, "subjectId", key, state, "runAt", "createdAt", "updatedAt")
SELECT gen_random_uuid(), 'review.post', id, 'review.post:' || id, 'due', now() AT TIME ZONE 'UTC', now() AT TIME ZONE 'UTC', now() AT TIME ZONE 'UTC'
FROM "Review" WHERE "messageTs" IS NULL;

INSERT INTO "SlackEffect" (id, kind, "subjectId", key, state, "runAt", "createdAt", "updatedAt")
SELECT gen_random_uuid(), 'review.show', id, 'review.show:' || id, 'due', now() AT TIME ZONE 'UTC', now() AT TIME ZONE 'UTC', now() AT TIME ZONE 'UTC'
FROM "Review" WHERE "messageTs" IS NOT NULL AND "shownState" IS DISTINCT FROM (CASE WHEN state = 'deciding' THEN 'pending' ELSE state END);

INSERT INTO "SlackEffect" (id, kind, "subjectId", key, state, "runAt", "createdAt", "updatedAt")
SELECT gen_random_uuid(), 'run.completion', id, 'run.completion:' || id, 'due', now() AT TIME ZONE 'UTC', now() AT TIME ZONE 'UTC', now() AT TIME ZONE 'UTC'
FROM "Execution" WHERE state IN ('completed', 'failed', 'lost') AND "completionTs" IS NULL;

INSERT INTO "SlackEffect" (id, kind, "subjectId", key, state, "runAt", "createdAt", "updatedAt")
SELECT gen_random_uuid(), 'flow.post', id, 'flow.post:' || id, 'due', now() AT TIME ZONE 'UTC', now() AT TIME ZONE 'UTC', now() AT TIME ZONE 'UTC'
FROM "FlowRequest" WHERE "messageTs" IS NULL AND state = 'pending';
